import { ParseResult } from "effect"

/** Longest part of a one-line problem taken from a schema's own description before it is cut. */
const MaxExpected = 100

/** A decoded path as a person writes it: `tests[0].expect.rule`. */
export const pathText = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>((out, k) => (typeof k === "number" ? `${out}[${k}]` : out === "" ? String(k) : `${out}.${String(k)}`), "")

const literal = /^Expected ("[^"]*"), actual (.*)$/s

/**
 * The one line a person needs from a schema failure: the most specific field that is wrong and
 * what it should be (`tests[0].expect: expected one of "ALLOW", "DENY", got "MAYBE"`), never the
 * schema's whole type written out.
 */
export const schemaProblem = (error: ParseResult.ParseError): string => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  if (issues.length === 0) return error.message.split("\n")[0] ?? "invalid"
  const depth = Math.max(...issues.map((i) => i.path.length))
  const deepest = issues.filter((i) => i.path.length === depth)
  // A wrong value says more than a key another branch of a union would not have allowed.
  const typed = deepest.filter((i) => i._tag !== "Unexpected")
  const chosen = typed.length > 0 ? typed : deepest
  const where = pathText(chosen[0]!.path)
  const literals = chosen.map((i) => literal.exec(i.message)).filter((m): m is RegExpExecArray => m !== null)
  let what: string
  if (literals.length > 1) {
    // A union of words and shapes: the words, and "an object" for the shapes (their types written out are no help).
    const shapes = chosen.length > literals.length ? (chosen.some((i) => i.message.startsWith("Expected {")) ? " or an object" : " or another form") : ""
    what = `expected one of ${literals.map((m) => m[1]).join(", ")}${shapes}, got ${cut(literals[0]![2]!)}`
  }
  else {
    const m = chosen.find((i) => i.message.length <= MaxExpected + 40) ?? chosen[0]!
    what = m._tag === "Unexpected" ? `not allowed here (${cut(m.message.replace(/^is unexpected, /, ""))})` : cut(m.message.replace(/^Expected/, "expected").replace(/, actual /, ", got "))
  }
  return where === "" ? what : `${where}: ${what}`
}

const cut = (s: string): string => (s.length > MaxExpected ? `${s.slice(0, MaxExpected - 1)}…` : s)
