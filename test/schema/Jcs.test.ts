import { describe, expect, it } from "vitest"
import fc from "fast-check"
import canonicalizePackage from "canonicalize"
import { createHash } from "node:crypto"
import * as Canonical from "../../runtime/schema/Canonical.js"
import { jcs } from "../../runtime/schema/internal/jcs.mjs"

// The one canonicalizer of kernel and auditor must be the `canonicalize` package's, byte for byte,
// error for error; the digests must be sha256 of that text.
const outcome = (f: () => string): { ok: string } | { error: string } => {
  try {
    return { ok: f() }
  } catch (e) {
    return { error: String(e) }
  }
}
const awkwardStrings = fc.oneof(fc.string(), fc.string({ unit: "grapheme" }), fc.string({ unit: "binary" }), fc.constantFrom('"', "\\", "\u0000", "\u001f", "\u2028", "\ud800", "\udc00x", "\ud83d\ude00", "10", "9", "__proto__", "toJSON"))
const values = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    awkwardStrings,
    fc.double(),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.constant(undefined),
    fc.array(tie("value")),
    fc.dictionary(awkwardStrings, tie("value"))
  )
})).value

describe("jcs", () => {
  it("writes what the canonicalize package writes, and throws where it throws", () => {
    fc.assert(
      fc.property(values, (v) => {
        const theirs = outcome(() => {
          const t = canonicalizePackage(v)
          if (t === undefined) throw new TypeError("value has no canonical JSON form")
          return t
        })
        const mine = outcome(() => jcs(v))
        expect("ok" in mine).toBe("ok" in theirs)
        if ("ok" in theirs) expect(mine).toEqual(theirs)
      }),
      { numRuns: 5000 }
    )
  })

  it("agrees on the edges: non-finite numbers, lone surrogates, sparse arrays, toJSON, deep and cyclic values", () => {
    const deep: Array<unknown> = []
    let at = deep
    for (let i = 0; i < 100; i++) at.push((at = []))
    const cyclic: Record<string, unknown> = { a: 1 }
    cyclic["self"] = cyclic
    // eslint-disable-next-line no-sparse-arrays
    const cases: Array<unknown> = [NaN, Infinity, -0, 1e21, 5e-324, "\ud800", { "\udfff": 1 }, [1, , 2], { toJSON: () => ({ b: 1, a: 2 }) }, new Date(0), deep, cyclic, { u: undefined, f: () => 1 }, [undefined, () => 1]]
    for (const v of cases) {
      const theirs = outcome(() => canonicalizePackage(v) ?? "undefined")
      const mine = outcome(() => jcs(v))
      expect("ok" in mine, String(v)).toBe("ok" in theirs)
      if ("ok" in theirs) expect(mine).toEqual(theirs)
    }
  })
})

const packageDigest = (v: unknown): string => {
  const t = canonicalizePackage(v)
  if (t === undefined) throw new TypeError("value has no canonical JSON form")
  return createHash("sha256").update(t).digest("hex")
}

describe("the digests", () => {
  it("are sha256 of the package's JCS text, on any call", () => {
    fc.assert(
      fc.property(awkwardStrings, fc.dictionary(fc.string(), values), awkwardStrings, awkwardStrings, awkwardStrings, (tool, args, s, t, c) => {
        expect(outcome(() => Canonical.callDigest(tool, args))).toEqual(outcome(() => packageDigest({ tool, args })))
        expect(outcome(() => Canonical.jcsDigest(args))).toEqual(outcome(() => packageDigest(args)))
        expect(outcome(() => Canonical.heldIdOf(tool, s, t, c))).toEqual(outcome(() => "h_" + packageDigest([tool, s, t, c]).slice(0, 32)))
      }),
      { numRuns: 2000 }
    )
  })
})
