import { Either, ParseResult, Schema } from "effect"
import { Envelope } from "../schema/Envelope.js"
import { MaxRequestBytes } from "../schema/Subjects.js"
import { invalidRequest, unauthenticated, type Reply } from "./Replies.js"

/** Deepest JSON nesting accepted; deeper bodies are refused before any recursive decoding. */
export const MaxDepth = 64

const decoder = new TextDecoder("utf-8", { fatal: true })

/** Parses a request body as JSON, refusing oversized, non-UTF-8, too deep or non-JSON bodies. */
export const parseBody = (data: Uint8Array): Either.Either<unknown, Reply> => {
  if (data.length > MaxRequestBytes) return Either.left(invalidRequest(`request is ${data.length} bytes; the limit is ${MaxRequestBytes}`, ""))
  let text: string
  try {
    text = decoder.decode(data)
  } catch {
    return Either.left(invalidRequest("request body is not valid UTF-8", ""))
  }
  if (nestingDepth(text) > MaxDepth) return Either.left(invalidRequest(`request nests deeper than ${MaxDepth} levels`, ""))
  try {
    return Either.right(JSON.parse(text))
  } catch (e) {
    return Either.left(invalidRequest(`request body is not JSON: ${(e as Error).message}`, ""))
  }
}

/** Maximum bracket depth outside string literals (a linear scan, no recursion). */
const nestingDepth = (text: string): number => {
  let depth = 0
  let max = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 92) i++
      else if (c === 34) inString = false
    } else if (c === 34) inString = true
    else if (c === 123 || c === 91) max = Math.max(max, ++depth)
    else if (c === 125 || c === 93) depth--
  }
  return max
}

/** Decodes with a schema; failure is the 400 reply naming the first offending field. */
export const decodeWith = <A, I>(schema: Schema.Schema<A, I>, value: unknown, prefix = ""): Either.Either<A, Reply> => {
  const result = Schema.decodeUnknownEither(schema, { errors: "first", onExcessProperty: "ignore" })(value)
  if (Either.isRight(result)) return Either.right(result.right)
  const issue = ParseResult.ArrayFormatter.formatErrorSync(result.left)[0]
  const path = [prefix, ...(issue?.path ?? []).map(String)].filter((p) => p !== "").join(".")
  return Either.left(invalidRequest(issue ? `${path || "request"}: ${issue.message}` : "request does not match the schema", path))
}

/** Parses a signed envelope; an envelope without key or signature is unauthenticated, not malformed. */
export const decodeEnvelope = (value: unknown): Either.Either<Envelope, Reply> => {
  if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    const v = value as Record<string, unknown>
    if (v["sig"] === undefined || v["key"] === undefined) return Either.left(unauthenticated("request is not signed: an envelope needs 'key' and 'sig'"))
  }
  return decodeWith(Envelope, value)
}
