import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { Schema } from "effect"
import { HeldEvent } from "../../runtime/schema/Events.js"
import type { HeldCallFacts } from "../../runtime/schema/Facts.js"
import { claimOf, dispatchEvent, readbackStep, resolveStep, type DispatchOutcome, type ReadbackOutcome } from "../../runtime/heldcall/plan/Execution.js"
import { admissionEvent } from "../../runtime/heldcall/plan/Admission.js"
import { verdictEvents, type Adjudged } from "../../runtime/heldcall/plan/Verdict.js"
import { deliveryPublished, witnessReminded } from "../../runtime/heldcall/plan/Notices.js"
import { HeldId, HumanContract, adjudicated, argsOf, at, ctxAt, fold, given, proposed, T0 } from "./Given.js"

// The drive's plans: every event the drive records is built here from facts, what the drive
// observed (a plugin's verdict, a tool's reply) and the time it passes in. No clock is read.
const key = `${HeldId}:g1`
const allowed = () => given(proposed(1, { ttlMs: 10_000 }), adjudicated(1, { verdict: "ALLOW" }))
const claimed = (ms = 10): HeldCallFacts => fold(allowed(), ...claimOf(allowed(), ctxAt(ms), "k1", 2_000)!.events)
const decodes = Schema.is(HeldEvent)

const adjudged = (verdict: Adjudged["verdict"], extra: Partial<Adjudged> = {}): Adjudged => ({
  verdict,
  reasons: verdict === "ALLOW" ? [] : [{ by: "rule:money_transfer", reason: "over the threshold" }],
  decisions: [],
  executed: { tool: "money_transfer", args: argsOf(1) },
  policyEpoch: 1,
  present: (generation, digest) => ({ tool: "money_transfer", call_digest: digest, generation, summary: "move money" }),
  ...(verdict === "REQUIRE_WITNESS" ? { contract: HumanContract } : {}),
  ...extra
})

describe("the execution claim", () => {
  it("given an ALLOW call, when the drive plans at 10 ms with a 2 s lease, then it claims and dispatches attempt 1 until 2.01 s, stamped with the time passed in", () => {
    const c = claimOf(allowed(), ctxAt(10), "k1", 2_000)!
    expect(c.leaseUntil).toBe(T0 + 2_010)
    expect(c.events.map((e) => e.type)).toEqual(["execution.leased", "effect.dispatched"])
    expect(c.events[1]).toMatchObject({ attempt: 1, owner: "k1", lease_until: at(2_010), at: at(10), idempotency_key: key })
  })

  it("given a live claim, when another drive plans before the lease ends, then there is no claim", () => {
    expect(claimOf(claimed(10), ctxAt(500), "k2", 2_000)).toBeNull()
  })

  it("given a call past its expiry, then there is no claim", () => {
    expect(claimOf(allowed(), ctxAt(10_000), "k1", 2_000)).toBeNull()
  })
})

describe("what one dispatch records", () => {
  it("when the tool replied, then the effect is recorded with its result", () => {
    expect(dispatchEvent(claimed(), { _tag: "Replied", ok: true, result: { done: 1 } }, T0 + 40)).toMatchObject({ type: "effect.recorded", ok: true, result: { done: 1 }, via: "dispatch", at: at(40) })
  })

  it("when nobody answered, then the attempt is unreached with its retry 0.5 s later", () => {
    expect(dispatchEvent(claimed(), { _tag: "NoResponders" }, T0 + 40)).toMatchObject({ type: "effect.unreached", attempt: 1, retry_at: at(540) })
  })

  it("when the reply was lost, then the outcome is unknown and waits for read-back", () => {
    expect(dispatchEvent(claimed(), { _tag: "Unanswered", reason: "timeout" }, T0 + 40)).toMatchObject({ type: "effect.outcome_unknown", needs_witness: false, reason: "timeout" })
  })
})

describe("resolving a lost dispatch", () => {
  it("given a claim whose lease is live, then resolve waits until the lease ends", () => {
    expect(resolveStep(claimed(10), "money_transfer", undefined, T0 + 1_010)).toEqual({ _tag: "Wait", ms: 1_010 })
  })

  it("given a claim whose lease ended, then the outcome becomes unknown", () => {
    const step = resolveStep(claimed(10), "money_transfer", undefined, T0 + 3_000)
    expect(step._tag === "Record" && step.events.map((e) => e.type)).toEqual(["effect.outcome_unknown"])
  })

  const unknown = () => fold(claimed(10), dispatchEvent(claimed(10), { _tag: "Unanswered", reason: "timeout" }, T0 + 40))

  it("given an unknown outcome on a tool with read-back, then the drive asks the read-back", () => {
    expect(resolveStep(unknown(), "money_transfer", undefined, T0 + 100)).toEqual({ _tag: "ReadBack" })
  })

  it("given a tool without read-back declared idempotent, then the key is sent again; not idempotent, then a witness must settle", () => {
    const resend = resolveStep(unknown(), "money_transfer", { readback: false, idempotent: true }, T0 + 100)
    const witness = resolveStep(unknown(), "money_transfer", { readback: false }, T0 + 100)
    expect(resend._tag === "Record" && resend.events[0]!.type).toBe("effect.resend")
    expect(witness._tag === "Record" && witness.events[0]).toMatchObject({ type: "effect.outcome_unknown", needs_witness: true })
  })

  it("when the read-back says applied, then the effect is recorded from it; when nobody serves it, then it is asked again after the backoff", () => {
    const applied = readbackStep(unknown(), "money_transfer", undefined, { _tag: "Answered", applied: true, result: { done: 1 } }, T0 + 100)
    expect(applied._tag === "Record" && applied.events.map((e) => e.type)).toEqual(["effect.readback", "effect.recorded"])
    const down = readbackStep(unknown(), "money_transfer", undefined, { _tag: "NoResponders" }, T0 + 100)
    expect(down._tag === "Record" && down.events[0]).toMatchObject({ type: "effect.readback_unreached", attempt: 1, retry_at: at(600) })
    const again = fold(unknown(), ...(down._tag === "Record" ? down.events : []))
    expect(resolveStep(again, "money_transfer", undefined, T0 + 200)).toEqual({ _tag: "Wait", ms: 400 })
  })

  it("when nobody serves the read-back past the call's expiry, then a witness must settle", () => {
    const step = readbackStep(unknown(), "money_transfer", undefined, { _tag: "NoResponders" }, T0 + 10_000)
    expect(step._tag === "Record" && step.events[0]).toMatchObject({ type: "effect.outcome_unknown", needs_witness: true })
  })
})

describe("a verdict's events", () => {
  const fresh = () => given(proposed(1))

  it("when adjudication allows, then one adjudicated event at the time passed in", () => {
    const plan = verdictEvents(fresh(), adjudged("ALLOW"), T0 + 5)
    expect(plan.events.map((e) => e.type)).toEqual(["call.adjudicated"])
    expect(plan.events[0]!.at).toBe(at(5))
    expect(plan.held).toBeUndefined()
  })

  it("when a witness is required, then the call is held with the presentation and its digest", () => {
    const plan = verdictEvents(fresh(), adjudged("REQUIRE_WITNESS"), T0 + 5)
    expect(plan.events.map((e) => e.type)).toEqual(["call.adjudicated", "call.held"])
    expect(plan.held?.witness_request.presentation).toMatchObject({ summary: "move money", generation: 1 })
  })

  it("given a held call shown the same thing, when adjudicated again, then it is not held again", () => {
    const first = verdictEvents(fresh(), adjudged("REQUIRE_WITNESS"), T0 + 5)
    const again = verdictEvents(fold(fresh(), ...first.events), adjudged("REQUIRE_WITNESS", { policyEpoch: 2 }), T0 + 50)
    expect(again.events.map((e) => e.type)).toEqual(["call.adjudicated"])
  })

  it("given an executed call, when a transform now produces another, then the proposal is re-presented as the next generation", () => {
    const first = verdictEvents(fresh(), adjudged("ALLOW", { executed: { tool: "money_transfer", args: { ...argsOf(1), memo: "a" } } }), T0 + 5)
    const second = verdictEvents(fold(fresh(), ...first.events), adjudged("ALLOW", { executed: { tool: "money_transfer", args: { ...argsOf(1), memo: "b" } }, policyEpoch: 2 }), T0 + 50)
    expect(second.events.map((e) => [e.type, e.generation])).toEqual([["call.represented", 2], ["call.adjudicated", 2]])
  })

  it("when adjudication denies, then the call is denied", () => {
    expect(verdictEvents(fresh(), adjudged("DENY"), T0 + 5).events.map((e) => e.type)).toEqual(["call.adjudicated", "call.denied"])
  })
})

describe("admission and notices", () => {
  const recorded = () => fold(claimed(), dispatchEvent(claimed(), { _tag: "Replied", ok: true, result: { done: 1 } }, T0 + 40))

  it("when admission admits, then the result is admitted; when it quarantines, then by whom and why", () => {
    expect(admissionEvent(recorded(), { admitted: true, decisions: [] }, T0 + 41)).toMatchObject({ type: "result.admitted", result: { done: 1 }, at: at(41) })
    expect(admissionEvent(recorded(), { admitted: false, by: "plugin:pii", reason: "pii", decisions: [] }, T0 + 41)).toMatchObject({ type: "result.quarantined", by: "plugin:pii" })
  })

  it("the n-th delivery and a reminder are recorded at the time passed in, with ids that name their cause and never the time", () => {
    const f = recorded()
    expect(deliveryPublished(f, 2, T0 + 60)).toMatchObject({ type: "delivery.published", attempt: 2, delivery_id: `d_${HeldId}_g1`, at: at(60) })
    expect(deliveryPublished(f, 2, T0 + 60).event_id).toBe(deliveryPublished(f, 2, T0 + 9_999).event_id)
    expect(witnessReminded(f, T0 + 60).event_id).toBe(witnessReminded(f, T0 + 70).event_id)
  })
})

// ---- Properties: the plans are functions of their inputs, and what they build is a wire event. ----

const offset = fc.integer({ min: 0, max: 20_000 })
const dispatchOutcome: fc.Arbitrary<DispatchOutcome> = fc.oneof(
  fc.record({ _tag: fc.constant("Replied" as const), ok: fc.constant(true as const), result: fc.jsonValue().map((v) => JSON.parse(JSON.stringify(v)) as never) }),
  fc.record({ _tag: fc.constant("Replied" as const), ok: fc.constant(false as const), error: fc.string() }),
  fc.constant({ _tag: "NoResponders" as const }),
  fc.record({ _tag: fc.constant("Unanswered" as const), reason: fc.string() })
)
const readbackOutcome: fc.Arbitrary<ReadbackOutcome> = fc.oneof(
  fc.record({ _tag: fc.constant("Answered" as const), applied: fc.constant(true as const), result: fc.jsonValue().map((v) => JSON.parse(JSON.stringify(v)) as never) }),
  fc.constant({ _tag: "Answered" as const, applied: false as const }),
  fc.constant({ _tag: "NoResponders" as const }),
  fc.constant({ _tag: "Unanswered" as const })
)
const rule = fc.option(fc.record({ readback: fc.option(fc.boolean(), { nil: undefined }), idempotent: fc.option(fc.boolean(), { nil: undefined }) }), { nil: undefined })

describe("properties of the drive's plans", () => {
  it("a dispatch's record is a wire event stamped with the time passed in, the same for the same inputs, and its id does not depend on the time", () => {
    fc.assert(
      fc.property(dispatchOutcome, offset, offset, (o, a, b) => {
        const f = claimed()
        const e = dispatchEvent(f, o, T0 + a)
        expect(decodes(e)).toBe(true)
        expect(e.at).toBe(at(a))
        expect(dispatchEvent(f, o, T0 + a)).toEqual(e)
        expect(dispatchEvent(f, o, T0 + b).event_id).toBe(e.event_id)
      })
    )
  })

  it("resolving and reading back never record anything for a call with no dispatch, and only wire events otherwise; a wait is at least 1 ms", () => {
    fc.assert(
      fc.property(dispatchOutcome, readbackOutcome, rule, offset, (o, rb, r, ms) => {
        expect(resolveStep(allowed(), "money_transfer", r, T0 + ms)).toEqual({ _tag: "Done" })
        const f = fold(claimed(), dispatchEvent(claimed(), o, T0 + 40))
        for (const step of [resolveStep(f, "money_transfer", r, T0 + ms), readbackStep(f, "money_transfer", r, rb, T0 + ms)]) {
          if (step._tag === "Record") {
            expect(step.events.length).toBeGreaterThan(0)
            step.events.forEach((e) => expect(decodes(e) && e.at === at(ms)).toBe(true))
            // Recording them moves the call on: they are new facts, not a repeat.
            expect(fold(f, ...step.events).last_seq).toBeGreaterThan(f.last_seq)
          }
          if (step._tag === "Wait") expect(step.ms).toBeGreaterThanOrEqual(1)
        }
      })
    )
  })

  it("a claim is taken at most once per lease: planned again on the claimed facts before the lease ends, there is none", () => {
    fc.assert(
      fc.property(offset, fc.integer({ min: 1, max: 5_000 }), fc.integer({ min: 0, max: 4_999 }), (ms, leaseMs, later) => {
        const c = claimOf(allowed(), ctxAt(ms), "k1", leaseMs)
        if (c === null) {
          expect(ms).toBeGreaterThanOrEqual(10_000)
          return
        }
        c.events.forEach((e) => expect(decodes(e)).toBe(true))
        if (later < leaseMs) expect(claimOf(fold(allowed(), ...c.events), ctxAt(ms + later), "k2", leaseMs)).toBeNull()
      })
    )
  })

  it("a verdict's events are wire events of the call's generation (or the next), at the time passed in, and the same for the same inputs", () => {
    fc.assert(
      fc.property(fc.constantFrom("ALLOW" as const, "REQUIRE_WITNESS" as const, "DENY" as const), offset, (verdict, ms) => {
        const plan = verdictEvents(given(proposed(1)), adjudged(verdict), T0 + ms)
        plan.events.forEach((e) => expect(decodes(e) && e.at === at(ms) && e.generation === 1).toBe(true))
        expect(verdictEvents(given(proposed(1)), adjudged(verdict), T0 + ms)).toEqual(plan)
      })
    )
  })
})
