import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { jcsDigest } from "../../runtime/schema/Canonical.js"
import type { StandingGrantPayload, StandingRecord } from "../../runtime/schema/StandingGrant.js"
import { judgeStandingGrant, outsideScope, standingApplied, standingRefusal } from "../../runtime/heldcall/Standing.js"
import { outlookOf, vetoOf } from "../../runtime/heldcall/Counting.js"
import { adjudicated, at, attestation, ctxAt, decideCtxAt, digestOf, fold, given, held, HeldId, proposed, signedBy } from "./Given.js"

// Standing approvals in the pure core: which grants may be recorded, which held calls a grant
// approves, and that its use is one approval among others (a veto still wins).
const grantOf = (over: Partial<StandingGrantPayload> = {}): StandingGrantPayload => ({
  op: "standing.grant",
  principal: "user:carol",
  class: "human",
  grant_id: "g1",
  scope: { principals: ["agent:alice"], tool: "money_transfer", args: { from: { any: true }, to: { eq: "acct-b" }, amount: { max: 5_000 } } },
  max_uses: 2,
  issued_at: at(0),
  expires_at: at(7_200_000),
  nonce: "nonce-standing-1",
  ...over
})
const recordOf = (p: StandingGrantPayload, over: Partial<StandingRecord> = {}): StandingRecord => ({
  type: "standing.granted",
  grant_id: p.grant_id,
  grant_digest: jcsDigest(p),
  grant: signedBy(p),
  uses: [],
  at: at(0),
  ...over
})
const use = (heldId: string, generation = 1) => ({ held_id: heldId, generation, call_digest: digestOf(generation), at: at(10) })
const parked = given(proposed(1), adjudicated(1), held(1))
const ctx = decideCtxAt(1_000)

describe("which grants may be recorded", () => {
  it("given carol's bounded grant for alice, then it may stand", () => {
    expect(judgeStandingGrant(grantOf(), ctx, ctx.now)).toBeNull()
  })

  it("given a grant for oneself, unbounded, of a class not held, or with an empty bound, then it is refused", () => {
    expect(judgeStandingGrant(grantOf({ scope: { principals: ["user:carol"], tool: "money_transfer" } }), ctx, ctx.now)).toContain("its own calls")
    expect(judgeStandingGrant(grantOf({ expires_at: at(400 * 86_400_000) }), ctx, ctx.now)).toContain("bounded")
    expect(judgeStandingGrant(grantOf({ expires_at: at(500) }), ctx, ctx.now)).toContain("has passed")
    expect(judgeStandingGrant(grantOf({ class: "fraud" }), ctx, ctx.now)).toContain("not registered with class")
    expect(judgeStandingGrant(grantOf({ scope: { principals: ["agent:alice"], tool: "money_transfer", args: { to: {} } } }), ctx, ctx.now)).toContain("bounds nothing")
    // A witnessed policy change is approved on its own: no admin pre-approves another's widenings.
    expect(judgeStandingGrant(grantOf({ principal: "admin:ops", class: "admin", scope: { principals: ["admin:root"], tool: "kernel_policy_apply" } }), { ...ctx, classesOf: (p) => (p.startsWith("admin:") ? ["admin"] : ctx.classesOf(p)) }, ctx.now)).toContain("kernel's own")
  })
})

describe("which held calls a grant approves", () => {
  it("given a parked call inside the scope, then the grant approves it and its use counts as carol's approval", () => {
    const p = grantOf()
    expect(standingRefusal(parked, recordOf(p), p, ctx, ctx.now)).toBeNull()
    const after = fold(parked, standingApplied(parked, recordOf(p), p, 1, at(1_000)))
    expect(outlookOf(after, ctx).status).toBe("satisfied")
  })

  it("given the grant is revoked, spent, expired, or not yet in force, then it approves nothing", () => {
    const p = grantOf()
    expect(standingRefusal(parked, recordOf(p, { revocation: signedBy({ principal: "user:carol" }) }), p, ctx, ctx.now)).toContain("revoked")
    expect(standingRefusal(parked, recordOf(p, { uses: [use("h_other1"), use("h_other2")] }), p, ctx, ctx.now)).toContain("spent")
    expect(standingRefusal(parked, recordOf(p, { uses: [use("h_other1"), use(HeldId)] }), p, ctx, ctx.now)).toBeNull()
    expect(standingRefusal(parked, recordOf(p), p, ctx, Date.parse(at(7_200_000)))).toContain("expired")
    const later = grantOf({ not_before: at(5_000) })
    expect(standingRefusal(parked, recordOf(later), later, ctx, ctx.now)).toContain("not in force")
  })

  it("given the witness lost its class or key, or the proposer is the witness, then it approves nothing", () => {
    const p = grantOf()
    expect(standingRefusal(parked, recordOf(p), p, { ...ctx, classesOf: (x) => (x === "user:carol" ? [] : ctx.classesOf(x)) }, ctx.now)).toContain("no longer holds")
    expect(standingRefusal(parked, recordOf(p), p, { ...ctx, keysOf: (x) => (x === "user:carol" ? ["key:new"] : ctx.keysOf(x)) }, ctx.now)).toContain("no longer holds")
    const own = grantOf({ principal: "agent:alice", class: "agent" })
    expect(standingRefusal(parked, recordOf(own), own, ctx, ctx.now)).toContain("not independent")
  })

  it("given the witness already rejected the generation, then its grant does not approve it", () => {
    const p = grantOf()
    const rejected = fold(parked, attestation({ witness: "user:carol", decision: "reject", issued: 500 }))
    expect(standingRefusal(rejected, recordOf(p), p, ctx, ctx.now)).toContain("final no")
  })

  it("given a compliance veto after the standing approval, then the call can no longer be released", () => {
    const p = grantOf()
    const approved = fold(parked, standingApplied(parked, recordOf(p), p, 1, at(1_000)))
    const vetoed = fold(approved, attestation({ witness: "compliance:zoe", class: "compliance", decision: "reject", issued: 500 }))
    expect(outlookOf(approved, ctx).status).toBe("satisfied")
    expect(vetoOf(vetoed, ctxAt(1_000))).toMatchObject({ witness: "compliance:zoe", kind: "reject" })
  })
})

describe("scope bounds (properties)", () => {
  it("an amount at most the bound is inside, any amount above it is outside", () => {
    const scope = grantOf().scope
    fc.assert(
      fc.property(fc.integer({ min: -1_000_000, max: 1_000_000 }), (amount) => {
        const outside = outsideScope(scope, "agent:alice", "money_transfer", { to: "acct-b", amount })
        return amount <= 5_000 ? outside === null : outside !== null
      })
    )
  })

  it("any other payee, tool or proposer is outside, whatever the amount", () => {
    const scope = grantOf().scope
    fc.assert(
      fc.property(fc.string(), fc.integer({ min: 0, max: 5_000 }), (to, amount) => {
        fc.pre(to !== "acct-b")
        return (
          outsideScope(scope, "agent:alice", "money_transfer", { to, amount }) !== null &&
          outsideScope(scope, "agent:bob", "money_transfer", { to: "acct-b", amount }) !== null &&
          outsideScope(scope, "agent:alice", "bank_balance", { to: "acct-b", amount }) !== null
        )
      })
    )
  })
})
