import { describe, expect, it } from "vitest"
import { contractDigest } from "../../runtime/schema/Canonical.js"
import { reconcile } from "../../runtime/heldcall/Reconciler.js"
import type { Extend } from "../../runtime/heldcall/Decide.js"
import type { HeldEvent } from "../../runtime/schema/Events.js"
import { adjudicated, at, ctxAt, decideCtxAt, digestOf, fold, given, givenCall, held, HeldId, HumanContract, proposed, signedBy } from "./Given.js"

// Expiry people see coming: a reminder a tenth of the hold before a held call expires (once per
// expiry), and an extension a witness the contract admits may sign, bounded by the policy's hold.
const parked = given(proposed(1), adjudicated(1), held(1))
const reminded = (expiresMs: number): HeldEvent => ({ type: "witness.reminded", event_id: `witness.reminded:${HeldId}:g1:${at(expiresMs)}`, held_id: HeldId, generation: 1, at: at(3_300_000), expires_at: at(expiresMs) })
const extendOf = (witness: string, toMs: number, klass = "human", signedMs = 500): Extend => {
  const payload = { op: "extend" as const, principal: witness, class: klass, held_id: HeldId, generation: 1, call_digest: digestOf(1), contract_digest: contractDigest(HumanContract), extend_to: at(toMs), issued_at: at(signedMs), expires_at: at(signedMs + 600_000), nonce: `extend-${witness}-${toMs}` }
  return { _tag: "Extend", payload: payload as Extend["payload"], envelope: signedBy(payload) }
}

describe("expiry reminders and extensions", () => {
  it("given a parked call, when a tenth of its hold is left, then the witnesses are reminded once", () => {
    expect(reconcile(parked, ctxAt(3_000_000)).actions).toEqual([])
    expect(reconcile(parked, ctxAt(3_300_000)).actions).toEqual([{ kind: "remind" }])
    const after = fold(parked, reminded(3_600_000))
    expect(reconcile(after, ctxAt(3_300_000)).actions).toEqual([])
    // Next it wakes at the expiry itself.
    expect(reconcile(after, ctxAt(3_300_000)).requeueMs).toBe(300_000)
  })

  it("when carol extends the call, then it expires later and a reminder comes again before the new expiry", () => {
    const { facts } = givenCall(proposed(1), adjudicated(1), held(1), reminded(3_600_000))
      .when(extendOf("user:carol", 5_000_000, "human", 3_290_000), decideCtxAt(3_300_000))
      .then({ reply: { status: 202, disposition: "accepted", expires_at: at(5_000_000) }, events: [{ type: "call.extended", witness: "user:carol", expires_at: at(5_000_000), from_expires_at: at(3_600_000) }] })
    expect(facts.spec?.expires_at).toBe(at(5_000_000))
    expect(reconcile(facts, ctxAt(3_700_000)).events.map((e) => e.type)).not.toContain("call.expired")
    expect(reconcile(facts, ctxAt(4_900_000)).actions).toEqual([{ kind: "remind" }])
  })

  it("when the proposer extends, or an extension is earlier or beyond the policy's hold, then nothing is written", () => {
    const call = [proposed(1), adjudicated(1), held(1)] as const
    givenCall(...call).when(extendOf("agent:alice", 5_000_000, "agent"), decideCtxAt(1_000)).then({ reply: { status: 422, reason: "witness is not independent of the proposer" }, events: [] })
    givenCall(...call).when(extendOf("user:carol", 3_000_000), decideCtxAt(1_000)).then({ reply: { status: 422 }, events: [] })
    givenCall(...call).when(extendOf("user:carol", 1_000 + 3_600_000 + 1), decideCtxAt(1_000)).then({ reply: { status: 422 }, events: [] })
  })
})
