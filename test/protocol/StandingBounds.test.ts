import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { Either, Schema } from "effect"
import { canonicalize } from "../../runtime/schema/Canonical.js"
import { StandingScope, type StandingGrantPayload } from "../../runtime/schema/StandingGrant.js"
import { judgeStandingGrant, outsideScope } from "../../runtime/heldcall/Standing.js"
import { at, decideCtxAt } from "../heldcall/Given.js"

// A standing approval approves only what its witness read bounded: every argument of a covered
// call is bounded by the grant or left free in so many words (`any: true`); objects and arrays
// are bounded whole. Tried with the arguments an agent would vary to slip past a grant.
const ctx = decideCtxAt(1_000)
const dave = { name: "dave", iban: "DE02 1203 0000 0000 2020 51" }
const scope = { principals: ["agent:alice"], tool: "money_transfer", args: { from: { eq: "alice" }, to: { eq: dave }, amount: { max: 3_000 } } }
const grantOf = (s: StandingGrantPayload["scope"]): StandingGrantPayload => ({
  op: "standing.grant", principal: "user:carol", class: "human", grant_id: "g", scope: s, max_uses: 1, issued_at: at(0), expires_at: at(3_600_000), nonce: "nonce-bounds-1"
})

describe("standing grants bound every argument", () => {
  it("an argument the grant does not name puts the call outside it, whatever the named bounds say", () => {
    const amountOnly = { principals: ["agent:alice"], tool: "money_transfer", args: { amount: { max: 3_000 } } }
    expect(outsideScope(amountOnly, "agent:alice", "money_transfer", { from: "alice", to: { name: "mallory" }, amount: 2_500 })).toContain("argument from is not bounded")
    expect(outsideScope(amountOnly, "agent:alice", "money_transfer", { amount: 2_500 })).toBeNull()
    // Left free explicitly, it is free.
    const free = { ...amountOnly, args: { ...amountOnly.args, from: { any: true as const }, to: { any: true as const } } }
    expect(outsideScope(free, "agent:alice", "money_transfer", { from: "alice", to: { name: "mallory" }, amount: 2_500 })).toBeNull()
  })

  it("an object argument bounded whole: any change anywhere in it, or an extra argument, is outside; key order is not a change", () => {
    expect(outsideScope(scope, "agent:alice", "money_transfer", { from: "alice", to: { iban: dave.iban, name: "dave" }, amount: 2_500 })).toBeNull()
    fc.assert(
      fc.property(fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }), fc.string({ maxLength: 8 }), (to, extra) => {
        fc.pre(canonicalize(to) !== canonicalize(dave))
        return (
          outsideScope(scope, "agent:alice", "money_transfer", { from: "alice", to: to as never, amount: 2_500 }) !== null &&
          (extra === "" || ["from", "to", "amount"].includes(extra) || outsideScope(scope, "agent:alice", "money_transfer", { from: "alice", to: dave, amount: 2_500, [extra]: 1 }) !== null)
        )
      })
    )
  })

  it("the kernel refuses a bound that bounds nothing or mixes any with a bound, naming the argument; any name of an argument may be bounded", () => {
    expect(judgeStandingGrant(grantOf(scope), ctx, ctx.now)).toBeNull()
    expect(judgeStandingGrant(grantOf({ ...scope, args: { ...scope.args, memo: {} } }), ctx, ctx.now)).toMatch(/scope.args.memo bounds nothing.*any: true/)
    expect(judgeStandingGrant(grantOf({ ...scope, args: { ...scope.args, memo: { any: true, eq: "x" } } }), ctx, ctx.now)).toContain("scope.args.memo: any: true")
    const names = { ...scope, args: { "beneficiary.iban": { eq: "x" }, "memo line": { any: true as const } } }
    expect(Either.getOrThrow(Schema.decodeUnknownEither(StandingScope)(names))).toEqual(names)
    expect(judgeStandingGrant(grantOf(names), ctx, ctx.now)).toBeNull()
    expect(judgeStandingGrant(grantOf({ ...scope, args: { "bad\u0000name": { eq: "x" } } }), ctx, ctx.now)).toContain("has a control character")
  })
})
