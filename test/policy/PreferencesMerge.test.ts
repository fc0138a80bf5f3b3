import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { activePolicy } from "../../runtime/policy/ActivePolicy.js"
import type { Adjudication } from "../../runtime/policy/Adjudicator.js"
import { applyPreferences, effectivePreferences, layerPreferences, mergePreferences, redactArgs, replacementsOf, wideningsOf } from "../../runtime/policy/Preferences.js"
import { canonicalize } from "../../runtime/schema/Canonical.js"
import type { Decision, Verdict } from "../../runtime/schema/Events.js"
import type { Preferences } from "../../runtime/schema/Preferences.js"

// The preference merge is pure: properties over random preference sets and adjudications.
const opt = <A>(a: fc.Arbitrary<A>) => fc.option(a, { nil: undefined })
const prefs: fc.Arbitrary<Preferences> = fc
  .record({
    require_witness: opt(fc.boolean()),
    always_witness: opt(fc.uniqueArray(fc.constantFrom("money_transfer", "money_*", "fs_write*", "pay"), { maxLength: 3 })),
    witness_route: opt(fc.constantFrom({ class: "human" }, { principal: "user:dave" }, { class: "ci" })),
    expires_in_ms: opt(fc.integer({ min: 1, max: 1_000_000 })),
    cancel_on_disconnect: opt(fc.boolean()),
    transforms: opt(
      fc.record({
        canonicalize: opt(fc.constantFrom("auto" as const, "preview" as const)),
        rewrite: opt(fc.constantFrom("auto" as const, "preview" as const)),
        substitution: opt(fc.constantFrom("allow" as const, "preview" as const, "forbid" as const))
      })
    ),
    disclosure: opt(fc.constantFrom("exact" as const, "redacted" as const))
  })
  .map((r) => JSON.parse(JSON.stringify(r)) as Preferences)

const same = (a: Preferences, b: Preferences) => expect(canonicalize(a)).toBe(canonicalize(b))
const layerOf = (p: Preferences) => ({ preferences: p, from: ["layer"] })

const rank: Record<Verdict, number> = { ALLOW: 0, TRANSFORM: 0, REQUIRE_WITNESS: 1, DENY: 2 } as Record<Verdict, number>
const transformDecision = (from: string, to: string, kind?: string): Decision => ({
  by: "plugin:t@1",
  output: { stage: "transform", input: { stage: "transform", proposal: { tool: from } }, result: { action: "replace", tool: to, args: {}, reason: "r", ...(kind ? { kind } : {}) } }
})
const adjudication: fc.Arbitrary<Adjudication> = fc
  .record({
    verdict: fc.constantFrom<Verdict>("ALLOW", "REQUIRE_WITNESS", "DENY"),
    replacement: fc.constantFrom("none", "substitution", "rewrite", "canonicalize")
  })
  .map(({ verdict, replacement }) => ({
    verdict,
    reasons: [],
    ...(verdict === "REQUIRE_WITNESS" ? { contract: { rule: { class: "human" } } } : {}),
    decisions:
      replacement === "none" ? [] : [replacement === "substitution" ? transformDecision("pay", "money_transfer") : transformDecision("money_transfer", "money_transfer", replacement === "canonicalize" ? "canonicalize" : undefined)],
    executed: { tool: "money_transfer", args: { amount: 1 } }
  }))

describe("mergePreferences", () => {
  it("is commutative, associative and idempotent (the order of layers never matters)", () => {
    fc.assert(
      fc.property(prefs, prefs, prefs, (a, b, c) => {
        same(mergePreferences(a, b), mergePreferences(b, a))
        same(mergePreferences(mergePreferences(a, b), c), mergePreferences(a, mergePreferences(b, c)))
        same(mergePreferences(a, a), mergePreferences(a, {}))
      }),
      { numRuns: 500 }
    )
  })

  it("is monotone: the merge is never looser than either side", () => {
    fc.assert(
      fc.property(prefs, prefs, (a, b) => {
        const m = mergePreferences(a, b)
        expect(wideningsOf(m, layerOf(a))).toEqual([])
        expect(wideningsOf(m, layerOf(b))).toEqual([])
      }),
      { numRuns: 500 }
    )
  })

  it("a per-call set is refused exactly when merging it would have to loosen the layer", () => {
    fc.assert(
      fc.property(prefs, prefs, (layer, call) => {
        const refused = wideningsOf(call, layerOf(layer)).length > 0
        // Accepted per-call preferences merge to themselves-or-stricter: the layer's view is kept.
        if (!refused) expect(wideningsOf(mergePreferences(layer, call), layerOf(layer))).toEqual([])
        for (const w of wideningsOf(call, layerOf(layer))) expect(w.message).toContain("'layer'")
      }),
      { numRuns: 500 }
    )
  })
})

describe("applyPreferences", () => {
  it("only narrows: the verdict is never looser than the adjudication's, and more preferences never loosen it", () => {
    fc.assert(
      fc.property(adjudication, prefs, prefs, (a, p, q) => {
        const one = applyPreferences(a, p, { tool: "money_transfer" })
        const both = applyPreferences(a, mergePreferences(p, q), { tool: "money_transfer" })
        expect(rank[one.verdict]).toBeGreaterThanOrEqual(rank[a.verdict])
        expect(rank[both.verdict]).toBeGreaterThanOrEqual(rank[one.verdict])
        expect(one.executed).toEqual(a.executed)
        if (one.verdict === "REQUIRE_WITNESS") expect(one.contract).toBeDefined()
        if (one.verdict === "DENY") expect(one.contract).toBeUndefined()
      }),
      { numRuns: 1000 }
    )
  })

  it("given a substitution: forbid denies, preview holds, allow runs", () => {
    const a: Adjudication = { verdict: "ALLOW", reasons: [], decisions: [transformDecision("pay", "money_transfer")], executed: { tool: "money_transfer", args: {} } }
    expect(applyPreferences(a, { transforms: { substitution: "forbid" } }, { tool: "pay" }).verdict).toBe("DENY")
    expect(applyPreferences(a, { transforms: { substitution: "preview" } }, { tool: "pay" }).verdict).toBe("REQUIRE_WITNESS")
    expect(applyPreferences(a, { transforms: { substitution: "allow" } }, { tool: "pay" }).verdict).toBe("ALLOW")
  })

  it("given a canonicalization: auto runs it even when semantic rewrites are previewed", () => {
    const a: Adjudication = { verdict: "ALLOW", reasons: [], decisions: [transformDecision("fs_read", "fs_read", "canonicalize")], executed: { tool: "fs_read", args: {} } }
    expect(replacementsOf(a.decisions, "fs_read")).toEqual([{ by: "plugin:t@1", from: "fs_read", to: "fs_read", kind: "canonicalize" }])
    expect(applyPreferences(a, { transforms: { rewrite: "preview" } }, { tool: "fs_read" }).verdict).toBe("ALLOW")
    expect(applyPreferences(a, { transforms: { canonicalize: "preview" } }, { tool: "fs_read" }).verdict).toBe("REQUIRE_WITNESS")
  })

  it("given a witness route: a preference-caused hold keeps the human rule and routes it; a policy hold keeps its own contract", () => {
    const allow: Adjudication = { verdict: "ALLOW", reasons: [], decisions: [], executed: { tool: "t", args: {} } }
    expect(applyPreferences(allow, { require_witness: true, witness_route: { class: "ci" } }, { tool: "t" }).contract).toMatchObject({ rule: { class: "human" }, route: { class: "ci" } })
    const held: Adjudication = { ...allow, verdict: "REQUIRE_WITNESS", contract: { rule: { class: "human" } } }
    expect(applyPreferences(held, { require_witness: true, witness_route: { class: "ci" } }, { tool: "t" }).contract?.rule).toEqual({ class: "human" })
  })
})

describe("layers from profiles", () => {
  const policy = activePolicy(1, [
    { name: "org", layer: "organization", preferences: { "*": { disclosure: "redacted" } } },
    { name: "bob-prefs", layer: "user", preferences: { "agent:bob": { always_witness: ["money_*"], expires_in_ms: 1000 } } }
  ])
  it("a principal gets its own entry merged with '*', and knows which profiles set them", () => {
    expect(layerPreferences(policy, "agent:bob")).toEqual({ preferences: { always_witness: ["money_*"], expires_in_ms: 1000, disclosure: "redacted" }, from: ["org", "bob-prefs"] })
    expect(layerPreferences(policy, "agent:alice")).toEqual({ preferences: { disclosure: "redacted" }, from: ["org"] })
  })
  it("a widening per-call choice names the field and the profiles", () => {
    expect(wideningsOf({ disclosure: "exact", expires_in_ms: 5000 }, layerPreferences(policy, "agent:bob")).map((w) => w.field)).toEqual(["expires_in_ms", "disclosure"])
    expect(wideningsOf({ disclosure: "exact" }, layerPreferences(policy, "agent:bob"))[0]!.message).toContain("'org', 'bob-prefs'")
  })
  it("wait is per call: a layer's wait never applies", () => {
    const p = activePolicy(1, [{ name: "u", preferences: { "*": { wait: { mode: "background" } } } }])
    expect(effectivePreferences(p, "agent:x", undefined).wait).toBeUndefined()
    expect(effectivePreferences(p, "agent:x", { wait: { mode: "block", max_ms: 10 } }).wait).toEqual({ mode: "block", max_ms: 10 })
  })
  it("redaction keeps the keys and replaces every value by its type", () => {
    expect(redactArgs({ a: 1, b: "x", c: null, d: [1], e: { f: 1 }, g: true })).toEqual({ a: "[redacted number]", b: "[redacted string]", c: "[redacted null]", d: "[redacted array]", e: "[redacted object]", g: "[redacted boolean]" })
  })
})
