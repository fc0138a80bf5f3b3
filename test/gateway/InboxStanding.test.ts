import { describe, expect, it } from "vitest"
import { inboxScript } from "./InboxScript.js"

type Scope = { principals: Array<string>; tool: string; args: Record<string, Record<string, unknown>> }
const jcs = inboxScript<(v: unknown) => string>("jcs.js", "jcs")
const S = inboxScript<{
  offerFor: (h: Record<string, unknown>, jcs: (v: unknown) => string) => { scope?: Scope; refused?: string }
  scopeWords: (scope: Scope, jcs: (v: unknown) => string) => string
}>("standing.js", "inboxStanding")

// "Approve calls like this" without a browser: every argument is bounded, objects and arrays
// whole, or nothing is offered and the panel says why.
const callWith = (args: Record<string, unknown>, presentation: Record<string, unknown> = { tool: "money_transfer", args }) => ({
  held_id: "h1", principal: "agent:alice", tool: "money_transfer", args, witness_request: { presentation }
})

describe("standing approval offer", () => {
  it("bounds every argument: numbers at most this call's, text, objects and arrays equal as canonical JSON, names that are not plain tokens included", () => {
    const args = { from: "alice", to: { name: "dave", iban: "DE02 1203 0000 0000 2020 51" }, amount: 2_500, "memo line": "rent", tags: ["a", "b"], urgent: false }
    const offer = S.offerFor(callWith(args), jcs)
    expect(offer.scope).toEqual({
      principals: ["agent:alice"], tool: "money_transfer",
      args: { from: { eq: "alice" }, to: { eq: args.to }, amount: { max: 2_500 }, "memo line": { eq: "rent" }, tags: { eq: ["a", "b"] }, urgent: { eq: false } }
    })
    const words = S.scopeWords(offer.scope!, jcs)
    expect(words).toBe('covers money_transfer by agent:alice with from = "alice", to = {"iban":"DE02 1203 0000 0000 2020 51","name":"dave"}, amount ≤ 2500, memo line = "rent", tags = ["a","b"], urgent = false')
  })

  it("is not offered, with the reason, when the values are redacted, not the call's own, or too long to read", () => {
    expect(S.offerFor(callWith({ amount: 1 }, { disclosure: "redacted", args: { amount: "[redacted number]" } }), jcs).refused).toContain("redacted")
    expect(S.offerFor(callWith({ to: "mallory" }, { tool: "money_transfer", args: { to: "dave" } }), jcs).refused).toContain("not the call's own")
    expect(S.offerFor(callWith({ note: "x".repeat(2_000) }), jcs).refused).toMatch(/argument note is 2002 characters/)
  })

  it("says an argument left free in so many words", () => {
    expect(S.scopeWords({ principals: ["agent:alice"], tool: "t", args: { memo: { any: true }, n: { min: 1, max: 5 } } }, jcs)).toBe("covers t by agent:alice with memo: any value, n ≥ 1 and ≤ 5")
  })
})
