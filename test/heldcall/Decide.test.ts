import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { decide, type Command } from "../../runtime/heldcall/Decide.js"
import { attachedOf } from "../../runtime/heldcall/decide/Dependency.js"
import { deliveryIdOf, EventIds } from "../../runtime/heldcall/EventIds.js"
import { initialFacts } from "../../runtime/heldcall/Facts.js"
import type { HeldEvent } from "../../runtime/schema/Events.js"
import {
  Admin,
  HeldId,
  Proposer,
  adjudicated,
  at,
  attestOf,
  decideCtxAt,
  denied,
  digestOf,
  dispatched,
  fold,
  given,
  givenCall,
  held,
  outcomeUnknown,
  proposed,
  proposeOf,
  signedBy
} from "./Given.js"

fc.configureGlobal({ seed: Number(process.env["WK_FC_SEED"] ?? 8785) })

/** A call parked on a human witness at generation 1. */
const parked = [proposed(1), adjudicated(1), held(1)] as const

const cancelBy = (principal: string): Command => {
  const payload = { op: "cancel" as const, principal, held_id: HeldId as never, reason: "changed my mind" }
  return { _tag: "Cancel", payload, envelope: signedBy(payload) }
}

const ackBy = (principal: string, deliveryId = deliveryIdOf({ held_id: HeldId, generation: 1 })): Command => {
  const payload = { op: "ack" as const, principal, held_id: HeldId as never, delivery_id: deliveryId }
  return { _tag: "Ack", payload, envelope: signedBy(payload) }
}

const settleBy = (principal: string, decision: "effect_happened" | "no_effect" = "no_effect"): Command => {
  const payload = {
    op: "settle" as const,
    principal,
    held_id: HeldId as never,
    generation: 1,
    call_digest: digestOf(1) as never,
    decision,
    issued_at: at(100) as never,
    expires_at: at(600_000) as never,
    nonce: `settle-${principal}`
  }
  return { _tag: "Settle", payload, envelope: signedBy(payload) }
}

const ParentId = "h_" + "b".repeat(32)
const ChildId = "h_" + "c".repeat(32)

/** A nested proposal by `principal` naming the test call as its parent. */
const attachBy = (principal: string, childId = ChildId, child: { parent_held_id?: string } | null = null): Command => {
  const payload = { ...proposeOf(1, { principal }).payload, call_id: "nested", parent_held_id: HeldId as never }
  return { _tag: "Attach", childId, payload, envelope: signedBy(payload), child }
}

describe("attest", () => {
  it("a bound approval of an independent witness is accepted and the call is driven", () => {
    givenCall(...parked)
      .when(attestOf({ witness: "user:carol" }))
      .then({ reply: { status: 202, disposition: "accepted" }, events: [{ type: "attestation.accepted", witness: "user:carol", decision: "approve", at: at(1_000) }], drive: "cached" })
  })

  it("the same signed bytes again are a duplicate: nothing written, the call is driven from a fresh read", () => {
    givenCall(...parked)
      .when(attestOf({ witness: "user:carol" }))
      .then({ reply: { status: 202 } })
      .when(attestOf({ witness: "user:carol" }))
      .then({ reply: { status: 200, disposition: "duplicate" }, events: [], drive: "fresh" })
  })

  it("a reject then an approve by the same principal on one generation: the approve is refused and recorded", () => {
    givenCall(...parked)
      .when(attestOf({ witness: "user:carol", decision: "reject" }))
      .then({ reply: { status: 202 }, events: [{ type: "attestation.accepted", decision: "reject" }] })
      .when(attestOf({ witness: "user:carol", decision: "approve", nonce: "nonce-carol-later" }))
      .then({ reply: { status: 422, disposition: "invalid" }, events: [{ type: "attestation.rejected", disposition: "invalid", witness: "user:carol" }], drive: null })
  })

  it("an attestation bound to another call digest is stale and changes nothing", () => {
    const { after } = givenCall(...parked)
      .when(attestOf({ witness: "user:carol", callDigest: digestOf(7) }))
    expect(after.evidence.filter((e) => e.status === "valid")).toEqual([])
    givenCall(...parked)
      .when(attestOf({ witness: "user:carol", callDigest: digestOf(7) }))
      .then({ reply: { status: 409, disposition: "stale", reason: "bound to another call digest" }, events: [{ type: "attestation.rejected", disposition: "stale" }], drive: null })
  })

  it("the proposer cannot witness its own call, by name or by key", () => {
    givenCall(...parked).when(attestOf({ witness: Proposer, class: "human" })).then({ reply: { status: 422 }, events: [{ type: "attestation.rejected" }] })
    givenCall(...parked)
      .when(attestOf({ witness: "user:carol", keyOf: Proposer }))
      .then({ reply: { status: 422, reason: "witness is not independent of the proposer: the proposer's key" } })
  })

  it("a class the contract does not admit, an expired statement, or an older generation is refused", () => {
    givenCall(...parked).when(attestOf({ witness: "agent:bob" })).then({ reply: { status: 422, disposition: "invalid" } })
    givenCall(...parked).when(attestOf({ witness: "user:carol", expiresMs: 500 })).then({ reply: { status: 422 } })
    givenCall(...parked).when(attestOf({ witness: "user:carol", generation: 2 })).then({ reply: { status: 409, disposition: "stale" } })
  })

  it("a call that does not exist answers 404 and writes nothing", () => {
    expect(decide(attestOf({ witness: "user:carol" }), initialFacts(HeldId), decideCtxAt(1_000))).toEqual({ reply: { status: 404, error: { code: "not_found", message: `no held call ${HeldId}` } }, events: [] })
  })
})

describe("cancel", () => {
  it("the proposer cancels a parked call; again is a no-op that still drives", () => {
    givenCall(...parked)
      .when(cancelBy(Proposer))
      .then({ reply: { status: 200, lifecycle: "cancelled" }, events: [{ type: "call.cancelled", by: Proposer }], drive: "cached" })
      .when(cancelBy(Proposer))
      .then({ reply: { status: 200 }, events: [], drive: "fresh" })
  })

  it("a non-proposer is forbidden; a policy admin may cancel", () => {
    givenCall(...parked).when(cancelBy("user:carol")).then({ reply: { status: 403 }, events: [], drive: null })
    givenCall(...parked).when(cancelBy(Admin)).then({ reply: { status: 200 }, events: [{ type: "call.cancelled", by: Admin }] })
  })

  it("once dispatched it is refused", () => {
    givenCall(proposed(1), adjudicated(1, { verdict: "ALLOW" }), dispatched(1)).when(cancelBy(Proposer)).then({ reply: { status: 409, error: { code: "already_dispatched" } }, events: [] })
  })

  it("a disconnected session cancels a parked call in the kernel's name, never a dispatched one", () => {
    givenCall(...parked).when({ _tag: "Disconnect", sessionId: "s1" }).then({ reply: { status: 200 }, events: [{ type: "call.cancelled", by: "kernel" }], drive: "cached" })
    givenCall(proposed(1), adjudicated(1, { verdict: "ALLOW" }), dispatched(1)).when({ _tag: "Disconnect", sessionId: "s1" }).then({ reply: { status: 409 }, events: [] })
  })
})

describe("ack", () => {
  const ended = [proposed(1), adjudicated(1, { verdict: "DENY" }), denied(1)] as const

  it("the proposer acknowledges an ended call's delivery once", () => {
    givenCall(...ended)
      .when(ackBy(Proposer))
      .then({ reply: { status: 200, continuation_delivery: "acknowledged" }, events: [{ type: "delivery.acknowledged" }], drive: null })
      .when(ackBy(Proposer))
      .then({ reply: { status: 200 }, events: [] })
  })

  it("given a held call that ended, when its delivery is acknowledged before it is recorded as published, then it is refused; once recorded, accepted", () => {
    const endedHeld = [...parked, denied(1)] as const
    const published: HeldEvent = { held_id: HeldId, generation: 1, at: at(10), type: "delivery.published", event_id: EventIds.deliveryPublished(HeldId, deliveryIdOf({ held_id: HeldId, generation: 1 }), 1), delivery_id: deliveryIdOf({ held_id: HeldId, generation: 1 }), attempt: 1 }
    givenCall(...endedHeld).when(ackBy(Proposer)).then({ reply: { status: 409, error: { code: "not_delivered" } }, events: [] })
    givenCall(...endedHeld, published).when(ackBy(Proposer)).then({ reply: { status: 200, continuation_delivery: "acknowledged" }, events: [{ type: "delivery.acknowledged" }] })
  })

  it("an ack by someone else, before the end, or for another delivery is refused", () => {
    givenCall(...ended).when(ackBy("agent:bob")).then({ reply: { status: 403 }, events: [] })
    givenCall(...parked).when(ackBy(Proposer)).then({ reply: { status: 409, error: { code: "not_delivered" } }, events: [] })
    givenCall(...ended).when(ackBy(Proposer, "d_other")).then({ reply: { status: 400 }, events: [] })
  })
})

describe("settle", () => {
  const unknown = [proposed(1), adjudicated(1, { verdict: "ALLOW" }), dispatched(1), outcomeUnknown(1)] as const

  it("an admin's determination settles an unknown outcome and the call is driven", () => {
    givenCall(...unknown)
      .when(settleBy(Admin))
      .then({ reply: { status: 202, authority: "admin" }, events: [{ type: "effect.settled", by: Admin, authority: "admin", decision: "no_effect" }], drive: "fresh" })
      .when(settleBy(Admin))
      .then({ reply: { status: 200, disposition: "duplicate" }, events: [], drive: "fresh" })
  })

  it("a read-back witness the tool's rule names settles it", () => {
    givenCall(...unknown).when(settleBy("svc:fraud", "effect_happened")).then({ reply: { status: 202, authority: "witness" }, events: [{ type: "effect.settled" }] })
  })

  it("a settle by the proposer is invalid; by anyone else it is forbidden; on a known outcome it is stale", () => {
    givenCall(...unknown).when(settleBy(Proposer)).then({ reply: { status: 422, reason: "the proposer cannot settle its own call's outcome" }, events: [] })
    givenCall(...unknown).when(settleBy("user:carol")).then({ reply: { status: 403 }, events: [] })
    givenCall(...parked).when(settleBy(Admin)).then({ reply: { status: 409, disposition: "stale" }, events: [] })
  })
})

describe("epoch change", () => {
  it("an open call judged under an older epoch records the new one and is driven", () => {
    givenCall(...parked).when({ _tag: "ChangeEpoch", epoch: 2 }).then({ events: [{ type: "policy.epoch_changed", policy_epoch: 2 }], drive: "cached" })
  })

  it("a call already judged under the epoch, or ended, is left alone; one that saw it is driven without a new event", () => {
    givenCall(...parked).when({ _tag: "ChangeEpoch", epoch: 1 }).then({ events: [], drive: null })
    givenCall(proposed(1), adjudicated(1, { verdict: "DENY" }), denied(1)).when({ _tag: "ChangeEpoch", epoch: 2 }).then({ events: [], drive: null })
    givenCall(...parked).when({ _tag: "ChangeEpoch", epoch: 2 }).then({}).when({ _tag: "ChangeEpoch", epoch: 2 }).then({ events: [], drive: "cached" })
  })
})

describe("nested calls", () => {
  it("the parent's proposer attaches a child: the edge is recorded with the chain above the child", () => {
    const { decision } = givenCall(...parked).when(attachBy(Proposer))
    expect(attachedOf(decision.reply)).toEqual({ parent_held_id: HeldId, ancestors: [{ held_id: HeldId, call_digest: digestOf(1) }], parent_expires_at: at(3_600_000) })
    givenCall(...parked).when(attachBy(Proposer)).then({ events: [{ type: "dependency.added", child_held_id: ChildId }], drive: null }).when(attachBy(Proposer)).then({ reply: { status: 200 }, events: [] })
  })

  it("a principal who is neither the proposer nor an admitted witness may not make the call wait", () => {
    givenCall(...parked).when(attachBy("agent:bob")).then({ reply: { status: 403 }, events: [] })
  })

  it("a cycle is refused on the parent, which fails closed; a dispatched parent can wait on nothing", () => {
    givenCall(...parked).when(attachBy(Proposer, HeldId)).then({ reply: { status: 403, outcome: "denied" }, events: [{ type: "dependency.refused" }], drive: "cached" })
    givenCall(proposed(1), adjudicated(1, { verdict: "ALLOW" }), dispatched(1)).when(attachBy(Proposer)).then({ reply: { status: 409, error: { code: "parent_dispatched" } }, events: [] })
  })

  it("a child that exists as a root call cannot be attached", () => {
    givenCall(...parked).when(attachBy(Proposer, ChildId, {})).then({ reply: { status: 409, error: { code: "dependency_mismatch" } }, events: [] })
  })

  it("a child's end is recorded on its parent once, and the parent is driven", () => {
    const child = { ...given(...parked), held_id: ChildId, outcome: "denied" as const, reasons: [{ by: "kernel", reason: "no" }] }
    givenCall(...parked)
      .when({ _tag: "Report", child })
      .then({ events: [{ type: "dependency.resolved", child_held_id: ChildId, outcome: "denied" }], drive: "cached" })
      .when({ _tag: "Report", child })
      .then({ events: [], drive: "fresh" })
    expect(decide({ _tag: "Report", child }, initialFacts(ParentId), decideCtxAt(0)).reply.status).toBe(404)
  })
})

describe("propose", () => {
  it("a new call is proposed as generation 1, expiring after the policy's held TTL", () => {
    const f0 = initialFacts(HeldId)
    const d = decide(proposeOf(1), f0, decideCtxAt(5_000))
    expect(d.events).toMatchObject([{ type: "call.proposed", generation: 1, event_id: `call.proposed:${HeldId}:g1`, idempotency_key: `${HeldId}:g1`, created_at: at(5_000), expires_at: at(3_605_000) }])
    expect(d.drive).toBe("cached")
  })

  it("the same proposal again writes nothing; an edit naming the generation it supersedes is the next generation", () => {
    givenCall(...parked).when(proposeOf(1)).then({ reply: { status: 200 }, events: [] })
    givenCall(...parked).when(proposeOf(2, { supersedes: 1 })).then({ events: [{ type: "call.proposed", generation: 2 }] })
  })

  it("an edit after dispatch, or an earlier generation's call coming back, is refused", () => {
    givenCall(proposed(1), adjudicated(1, { verdict: "ALLOW" }), dispatched(1)).when(proposeOf(2, { supersedes: 1 })).then({ reply: { status: 409, error: { code: "already_dispatched" } }, events: [] })
    givenCall(...parked, proposed(2)).when(proposeOf(1)).then({ reply: { status: 409, error: { code: "superseded" } }, events: [] })
  })

  it("a refused nested call is recorded proposed and denied at once", () => {
    const payload = { ...proposeOf(1).payload, parent_held_id: ParentId as never }
    const d = decide({ _tag: "ProposeRefused", payload, envelope: signedBy(payload), salt: "s", reason: "cycle" }, initialFacts(ChildId), decideCtxAt(0))
    const after = fold({ ...initialFacts(ChildId) }, ...d.events)
    expect(d.events.map((e) => e.type)).toEqual(["call.proposed", "call.denied"])
    expect(after.outcome).toBe("denied")
  })
})

describe("decide is a pure function of (command, facts, ctx)", () => {
  /** Facts along the life of a witnessed call, and along an ALLOW call whose outcome became unknown. */
  const histories: ReadonlyArray<ReadonlyArray<HeldEvent>> = [
    [],
    [proposed(1)],
    [...parked],
    [...parked, proposed(2)],
    [proposed(1), adjudicated(1, { verdict: "DENY" }), denied(1)],
    [proposed(1), adjudicated(1, { verdict: "ALLOW" }), dispatched(1), outcomeUnknown(1)]
  ]
  const commands: ReadonlyArray<Command> = [
    proposeOf(1),
    proposeOf(2, { supersedes: 1 }),
    attestOf({ witness: "user:carol" }),
    attestOf({ witness: "user:carol", decision: "reject" }),
    attestOf({ witness: "user:dave", generation: 2 }),
    attestOf({ witness: Proposer, class: "human" }),
    cancelBy(Proposer),
    cancelBy("user:carol"),
    { _tag: "Disconnect", sessionId: "s1" },
    ackBy(Proposer),
    ackBy("agent:bob"),
    settleBy(Admin),
    settleBy(Proposer),
    attachBy(Proposer),
    { _tag: "ChangeEpoch", epoch: 2 },
    { _tag: "Report", child: { ...initialFacts(ChildId), outcome: "completed" } }
  ]
  const arb = fc.record({
    history: fc.constantFrom(...histories),
    sequence: fc.array(fc.constantFrom(...commands), { minLength: 1, maxLength: 6 }),
    nowMs: fc.integer({ min: 0, max: 4_000_000 })
  })

  it("the same command on the same facts and context decides the same", () => {
    fc.assert(
      fc.property(arb, ({ history, sequence, nowMs }) => {
        let facts = history.length === 0 ? initialFacts(HeldId) : given(...history)
        for (const c of sequence) {
          const ctx = decideCtxAt(nowMs)
          const a = decide(c, facts, ctx)
          expect(decide(c, facts, decideCtxAt(nowMs))).toEqual(a)
          facts = fold(facts, ...a.events)
        }
      })
    )
  })

  it("a decision's events are new, fold with evolve, and deciding the same command again writes nothing", () => {
    fc.assert(
      fc.property(arb, ({ history, sequence, nowMs }) => {
        let facts = history.length === 0 ? initialFacts(HeldId) : given(...history)
        for (const c of sequence) {
          const d = decide(c, facts, decideCtxAt(nowMs))
          for (const e of d.events) expect(facts.seen).not.toContain(e.event_id)
          const after = fold(facts, ...d.events)
          for (const e of d.events) expect(after.seen).toContain(e.event_id)
          expect(after.last_seq).toBe(facts.last_seq + d.events.length)
          expect(decide(c, after, decideCtxAt(nowMs)).events).toEqual([])
          facts = after
        }
      })
    )
  })
})
