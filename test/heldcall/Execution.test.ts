import { describe, expect, it } from "vitest"
import { mayDispatch, reconcile } from "../../runtime/heldcall/Reconciler.js"
import type { HeldEvent } from "../../runtime/schema/Events.js"
import { HeldId, adjudicated, at, ctxAt, fold, given, proposed } from "./Given.js"

// Truthful execution states: a request that reached nobody, an unknown outcome, and how each ends.
const key = `${HeldId}:g1`
const base = (ms: number) => ({ held_id: HeldId, generation: 1, at: at(ms) })
const dispatched = (attempt: number, ms: number): HeldEvent => ({ ...base(ms), type: "effect.dispatched", event_id: `effect.dispatched:${attempt}`, idempotency_key: key, attempt, owner: "k1", lease_until: at(ms + 5000), policy_epoch: 1 })
const unreached = (attempt: number, ms: number, retryMs: number): HeldEvent => ({ ...base(ms), type: "effect.unreached", event_id: `effect.unreached:${attempt}`, idempotency_key: key, attempt, reason: "no tool service answers money_transfer", retry_at: at(retryMs) })
const unknown: HeldEvent = { ...base(100), type: "effect.outcome_unknown", event_id: "effect.outcome_unknown:1", idempotency_key: key, reason: "timeout", needs_witness: true }
const settled = (decision: "effect_happened" | "no_effect"): HeldEvent => ({
  ...base(200),
  type: "effect.settled",
  event_id: `effect.settled:${decision}`,
  idempotency_key: key,
  by: "user:carol",
  authority: "witness",
  decision,
  ...(decision === "effect_happened" ? { result: { transfer_id: "t1" } } : {}),
  reason: "checked the ledger",
  attestation_digest: "d",
  envelope: { payload: {}, key: "AAAA", sig: "AAAA" }
})

/** An ALLOW call (expires at 10 s) whose first dispatch reached no tool service at 50 ms; retry from 550 ms. */
const allowed = () => given(proposed(1, { ttlMs: 10_000 }), adjudicated(1, { verdict: "ALLOW" }))
const unreachedOnce = () => fold(allowed(), dispatched(1, 10), unreached(1, 50, 550))
const kinds = (p: { actions: ReadonlyArray<{ kind: string }> }) => p.actions.map((a) => a.kind)

describe("a dispatch that reached no tool service", () => {
  it("given the request reached nobody, then no effect can have happened: the call is back to not dispatched, and the unreached attempt is counted", () => {
    const f = unreachedOnce()
    expect(f).toMatchObject({ execution: "none", lease_owner: null, lease_until: null, unreached: { attempts: 1, retry_at: at(550) } })
  })

  it("when the backoff has not passed, then nothing is dispatched and the call is looked at again when it has", () => {
    const plan = reconcile(unreachedOnce(), ctxAt(100))
    expect(kinds(plan)).not.toContain("execute")
    expect(plan.requeueMs).toBe(450)
    expect(mayDispatch(unreachedOnce(), ctxAt(100))).toBe(false)
  })

  it("when the backoff has passed, then the same key is dispatched again", () => {
    expect(kinds(reconcile(unreachedOnce(), ctxAt(600)))).toContain("execute")
  })

  it("when the tool is still unreachable at expiry, then the call expires saying why", () => {
    const f = fold(unreachedOnce(), dispatched(2, 600), unreached(2, 610, 20_000))
    const plan = reconcile(f, ctxAt(10_000))
    expect(plan.events.map((e) => e.type)).toEqual(["call.expired"])
    expect(plan.facts).toMatchObject({ lifecycle: "expired", outcome: "expired", unreached: { attempts: 2 } })
    expect(plan.facts.reasons[0]?.reason).toMatch(/unreachable until the call expired \(2 attempts\)/)
  })
})

describe("an unknown outcome", () => {
  const unknownCall = () => fold(allowed(), dispatched(1, 10), unknown)

  it("given an unknown outcome past expiry, then it never expires (the effect may have happened)", () => {
    const plan = reconcile(unknownCall(), ctxAt(20_000))
    expect(plan.events).toEqual([])
    expect(plan.facts.lifecycle).toBe("open")
  })

  it("when an idempotent tool's request is re-sent, then the same key is dispatched again, even past expiry", () => {
    const f = fold(unknownCall(), { ...base(300), type: "effect.resend", event_id: "effect.resend:1", idempotency_key: key, reason: "idempotent" })
    expect(f).toMatchObject({ execution: "none", resend: true, needs_witness: false })
    const plan = reconcile(f, ctxAt(20_000))
    expect(plan.events.map((e) => e.type)).not.toContain("call.expired")
    expect(kinds(plan)).toContain("execute")
    expect(fold(f, dispatched(2, 20_000)).resend).toBeUndefined()
  })

  it("when a read-back witness attests the effect happened, then the effect is recorded with what it read back and the result is admitted next", () => {
    const f = fold(unknownCall(), settled("effect_happened"))
    expect(f).toMatchObject({ execution: "effect-recorded", effect: { ok: true, result: { transfer_id: "t1" }, via: "settled:witness" }, needs_witness: false })
    expect(kinds(reconcile(f, ctxAt(20_000)))).toContain("admit")
  })

  it("when it is attested that no effect happened, then the call ends with that as its error, naming who said so", () => {
    const f = fold(unknownCall(), settled("no_effect"))
    expect(f.effect).toMatchObject({ ok: false, via: "settled:witness" })
    expect(f.effect?.error).toMatch(/did not happen \(witness user:carol: checked the ledger\)/)
    expect(kinds(reconcile(f, ctxAt(20_000)))).toContain("admit")
  })

  it("a settlement of a call whose outcome is not unknown changes nothing", () => {
    const f = fold(allowed(), settled("effect_happened"))
    expect(f.execution).toBe("none")
  })
})

describe("an unknown outcome whose read-back reached no tool service", () => {
  const unknownAsked: HeldEvent = { ...base(100), type: "effect.outcome_unknown", event_id: "effect.outcome_unknown:asked", idempotency_key: key, reason: "timeout", needs_witness: false }
  const readbackUnreached = (attempt: number, ms: number, retryMs: number): HeldEvent => ({ ...base(ms), type: "effect.readback_unreached", event_id: `effect.readback_unreached:${attempt}`, idempotency_key: key, attempt, reason: "no tool service answers the read-back of money_transfer", retry_at: at(retryMs) })
  const down = () => fold(allowed(), dispatched(1, 10), unknownAsked, readbackUnreached(1, 120, 620))

  it("given the read-back reached nobody, then the outcome stays unknown, needs no witness, and the attempt is counted", () => {
    expect(down()).toMatchObject({ execution: "outcome-unknown", needs_witness: false, readback_unreached: { attempts: 1, retry_at: at(620) } })
  })

  it("when the backoff has not passed, then read-back is not asked and the call is looked at again when it has", () => {
    const plan = reconcile(down(), ctxAt(200))
    expect(kinds(plan)).not.toContain("resolve")
    expect(plan.requeueMs).toBe(420)
  })

  it("when the backoff has passed, then read-back is asked again", () => {
    expect(kinds(reconcile(down(), ctxAt(700)))).toContain("resolve")
  })

  it("when a later read-back finds the effect absent, then the same key may be dispatched again and the unreached count is gone", () => {
    const f = fold(down(), { ...base(700), type: "effect.readback", event_id: "effect.readback:1", idempotency_key: key, applied: false })
    expect(f.execution).toBe("none")
    expect(f.readback_unreached).toBeUndefined()
  })
})
