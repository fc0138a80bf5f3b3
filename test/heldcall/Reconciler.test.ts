import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { countingApprovals, mayDispatch, reconcile, vetoOf, type ReconcileContext } from "../../runtime/heldcall/Reconciler.js"
import { reduce } from "../../runtime/heldcall/Reducer.js"
import { satisfies } from "../../runtime/heldcall/WitnessRuleEval.js"
import type { HeldEvent } from "../../runtime/schema/Events.js"
import type { HeldCallFacts } from "../../runtime/schema/Facts.js"
import type { WitnessContract } from "../../runtime/schema/WitnessContract.js"
import {
  HeldId,
  HumanContract,
  Registry,
  adjudicated,
  at,
  attestation,
  ctxAt,
  epochChanged,
  fold,
  given,
  held,
  proposed,
  sequenced,
  type Statement
} from "./Given.js"

/** Fixed seed for deterministic CI; set WK_FC_SEED to explore other cases. */
fc.configureGlobal({ seed: Number(process.env["WK_FC_SEED"] ?? 8785) })

const readinessEvents = (plan: { events: ReadonlyArray<HeldEvent> }) =>
  plan.events.filter((e) => e.type === "readiness.changed").map((e) => (e as { readiness: string }).readiness)
const kinds = (plan: { actions: ReadonlyArray<{ kind: string }> }) => plan.actions.map((a) => a.kind)
const types = (plan: { events: ReadonlyArray<HeldEvent> }) => plan.events.map((e) => e.type)

/** Folds a plan's local events the way the store would (next sequences), for the next tick. */
const commit = (facts: HeldCallFacts, plan: { events: ReadonlyArray<HeldEvent> }) => fold(facts, ...plan.events)

describe("readiness: unsatisfied -> satisfied -> stale -> re-evaluated", () => {
  const parked = given(proposed(1), adjudicated(1), held(1))
  const approve = (witness: string, issued = 100, contract?: WitnessContract) => attestation({ witness, decision: "approve", issued, ...(contract ? { contract } : {}) })

  it("given a parked call with no evidence, then nothing changes and nothing may run", () => {
    const plan = reconcile(parked, ctxAt(1000))
    expect(plan.events).toEqual([])
    expect(plan.actions).toEqual([])
    expect(parked.readiness).toBe("unsatisfied")
    expect(mayDispatch(parked, ctxAt(1000))).toBe(false)
    // it wakes itself to remind the witnesses a tenth of the hold (6 minutes) before the expiry
    expect(plan.requeueMs).toBe(3_600_000 - 360_000 - 1000)
  })

  it("when an independent human approves, then readiness becomes satisfied and execution is asked for", () => {
    const plan = reconcile(fold(parked, approve("user:carol")), ctxAt(1000))
    expect(readinessEvents(plan)).toEqual(["satisfied"])
    expect(kinds(plan)).toEqual(["execute"])
    expect(mayDispatch(plan.facts, ctxAt(1000))).toBe(true)
  })

  it("when the policy epoch moves on, then readiness goes stale, dispatch stops, and the call is re-adjudicated", () => {
    const ready = commit(fold(parked, approve("user:carol")), reconcile(fold(parked, approve("user:carol")), ctxAt(1000)))
    expect(ready.readiness).toBe("satisfied")
    // the event that announces the new epoch, and a kernel that already runs it
    const bumped = fold(ready, epochChanged(2))
    expect(mayDispatch(bumped, ctxAt(1000, 2))).toBe(false)
    const plan = reconcile(bumped, ctxAt(1000, 2))
    expect(readinessEvents(plan)).toEqual(["stale"])
    expect(kinds(plan)).toEqual(["adjudicate"])
    expect(mayDispatch(plan.facts, ctxAt(1000, 2))).toBe(false)
    // a kernel that learns the new epoch before the event does the same
    expect(readinessEvents(reconcile(ready, ctxAt(1000, 2)))).toEqual(["stale"])
  })

  it("when re-adjudicated under the new epoch with the same contract, then the standing approval counts again", () => {
    const approved = fold(parked, approve("user:carol"))
    const ready = commit(approved, reconcile(approved, ctxAt(1000)))
    const bumped = fold(ready, epochChanged(2))
    const s2 = commit(bumped, reconcile(bumped, ctxAt(1000, 2)))
    expect(s2.readiness).toBe("stale")
    const readjudicated = fold(s2, adjudicated(1, { policyEpoch: 2 }))
    const plan = reconcile(readjudicated, ctxAt(1000, 2))
    expect(readinessEvents(plan)).toEqual(["satisfied"])
    expect(kinds(plan)).toEqual(["execute"])
  })

  it("when re-adjudicated with a stricter contract, then old evidence no longer counts until new approvals arrive", () => {
    const strict: WitnessContract = { rule: { class: "human", count: 2 }, veto: ["compliance"] }
    const ready = commit(fold(parked, approve("user:carol")), reconcile(fold(parked, approve("user:carol")), ctxAt(1000)))
    const stale = commit(ready, reconcile(fold(ready, epochChanged(2)), ctxAt(1000, 2)))
    const readjudicated = fold(stale, epochChanged(2), adjudicated(1, { policyEpoch: 2, contract: strict }), held(1, strict))
    const plan = reconcile(readjudicated, ctxAt(1000, 2))
    expect(readinessEvents(plan)).toEqual(["unsatisfied"])
    expect(kinds(plan)).toEqual([])
    const twoNew = fold(commit(readjudicated, plan), approve("user:dave", 200, strict), approve("user:erin", 201, strict))
    expect(readinessEvents(reconcile(twoNew, ctxAt(1000, 2)))).toEqual(["satisfied"])
  })

  it("when the approving witness revokes, then readiness falls back and dispatch is refused", () => {
    const approved = fold(parked, approve("user:carol"))
    const ready = commit(approved, reconcile(approved, ctxAt(1000)))
    const revoked = fold(ready, attestation({ witness: "user:carol", decision: "revoke", issued: 200 }))
    expect(mayDispatch(revoked, ctxAt(1000))).toBe(false)
    expect(readinessEvents(reconcile(revoked, ctxAt(1000)))).toEqual(["unsatisfied"])
  })

  it("when the approval expires, then readiness falls back", () => {
    const approved = fold(parked, attestation({ witness: "user:carol", decision: "approve", issued: 100, expiresMs: 5000 }))
    const ready = commit(approved, reconcile(approved, ctxAt(1000)))
    expect(reconcile(ready, ctxAt(1000)).requeueMs).toBe(4000) // wakes at the approval's expiry
    expect(mayDispatch(ready, ctxAt(5000))).toBe(false)
    expect(readinessEvents(reconcile(ready, ctxAt(5000)))).toEqual(["unsatisfied"])
  })

  it("approvals that are not independent never count: the proposer, a class the witness lacks, an old generation", () => {
    const facts = fold(
      parked,
      attestation({ witness: "agent:alice", class: "human", decision: "approve", issued: 100 }),
      attestation({ witness: "agent:bob", class: "human", decision: "approve", issued: 101 }),
      attestation({ witness: "user:dave", decision: "approve", issued: 102, generation: 2 })
    )
    expect(countingApprovals(facts, ctxAt(1000))).toEqual([])
    expect(reconcile(facts, ctxAt(1000)).events).toEqual([])
  })

  it("a veto-class reject ends the call as denied", () => {
    const facts = fold(parked, attestation({ witness: "user:carol", decision: "approve", issued: 100 }), attestation({ witness: "compliance:zoe", decision: "reject", issued: 101 }))
    expect(vetoOf(facts, ctxAt(1000))?.witness).toBe("compliance:zoe")
    expect(mayDispatch(facts, ctxAt(1000))).toBe(false)
    const plan = reconcile(facts, ctxAt(1000))
    expect(types(plan)).toEqual(["call.denied"])
    expect(plan.facts).toMatchObject({ lifecycle: "denied", outcome: "denied", continuation_delivery: "pending" })
    expect(kinds(plan)).toEqual(["deliver"])
  })

  it("given a veto-class reject with a reason, when the call is denied, then the denial carries the witness's own words", () => {
    const facts = fold(parked, attestation({ witness: "compliance:zoe", decision: "reject", issued: 101, reason: "beneficiary is on the sanctions list" }))
    expect(reconcile(facts, ctxAt(1000)).facts.reasons).toEqual([{ by: "compliance:zoe", reason: "veto by compliance witness compliance:zoe: beneficiary is on the sanctions list" }])
  })

  it("a held call past its expiry expires before anything else", () => {
    const plan = reconcile(fold(parked, attestation({ witness: "user:carol", decision: "approve", issued: 100 })), ctxAt(3_600_000))
    expect(types(plan)).toEqual(["call.expired"])
    expect(plan.facts.lifecycle).toBe("expired")
  })
})

describe("reconcile: a bounded fixed point", () => {
  // Needs two local events: the fallback route after the timeout, then readiness under it.
  const routed: WitnessContract = { rule: { class: "human", count: 2 }, fallback: { after_ms: 1000, action: "route", rule: { class: "human" } } }
  const facts = given(proposed(1), adjudicated(1, { contract: routed }), held(1, routed), attestation({ witness: "user:carol", decision: "approve", issued: 100, contract: routed }))

  it("within the bound it derives both local events and then asks for execution", () => {
    const plan = reconcile(facts, ctxAt(2000))
    expect(types(plan)).toEqual(["witness.fallback_applied", "readiness.changed"])
    expect(kinds(plan)).toEqual(["execute"])
    // and the next tick has nothing left to derive
    expect(reconcile(commit(facts, plan), ctxAt(2000)).events).toEqual([])
  })

  it("hitting the bound yields exactly one reconcile.bound_exceeded event and no actions", () => {
    const plan = reconcile(facts, ctxAt(2000, 1, { bound: 1 }))
    expect(types(plan)).toEqual(["witness.fallback_applied", "reconcile.bound_exceeded"])
    expect(plan.events.filter((e) => e.type === "reconcile.bound_exceeded")).toHaveLength(1)
    expect(plan.events.at(-1)).toMatchObject({ type: "reconcile.bound_exceeded", bound: 1, held_id: HeldId, generation: 1 })
    expect(plan.actions).toEqual([])
    expect(plan.requeueMs).toBeNull()
    expect(plan.facts.errors).toEqual(["reconcile bound 1 exceeded at generation 1"])
  })

  it("bound 0: the error event alone", () => {
    const plan = reconcile(facts, ctxAt(2000, 1, { bound: 0 }))
    expect(types(plan)).toEqual(["reconcile.bound_exceeded"])
    expect(plan.actions).toEqual([])
  })

  it("is deterministic: the same facts and context give the same plan, event ids included", () => {
    expect(reconcile(facts, ctxAt(2000, 1, { bound: 1 }))).toEqual(reconcile(facts, ctxAt(2000, 1, { bound: 1 })))
    expect(reconcile(facts, ctxAt(2000))).toEqual(reconcile(facts, ctxAt(2000)))
  })
})

// ---------------------------------------------------------------------------------------------
// Random reachable facts: any sequence of events a kernel could have recorded, in any order.

const Contracts: ReadonlyArray<WitnessContract> = [
  HumanContract,
  { rule: { class: "human", count: 2 }, veto: ["compliance"] },
  { rule: { quorum: { n: 2, of: [{ class: "human" }, { class: "fraud" }, { principal: "compliance:zoe" }] } } },
  { rule: { any: [{ principal: "user:erin" }, { all: [{ class: "human" }, { class: "fraud" }] }] }, veto: ["fraud"] }
]
const Witnesses = Object.keys(Registry)

const statementArb: fc.Arbitrary<Statement> = fc.record({
  witness: fc.constantFrom(...Witnesses),
  class: fc.option(fc.constantFrom("human", "agent", "fraud", "compliance"), { nil: undefined }),
  decision: fc.constantFrom("approve", "approve", "reject", "revoke", "evidence") as fc.Arbitrary<Statement["decision"]>,
  issued: fc.integer({ min: 0, max: 5000 }),
  expiresMs: fc.integer({ min: 100, max: 20_000 }),
  generation: fc.constantFrom(1, 1, 2),
  contract: fc.constantFrom(...Contracts),
  rejected: fc.option(fc.constantFrom("stale", "invalid") as fc.Arbitrary<"stale" | "invalid">, { nil: undefined, freq: 5 })
})

const eventArb: fc.Arbitrary<HeldEvent> = fc.oneof(
  { weight: 6, arbitrary: statementArb.map(attestation) },
  { weight: 1, arbitrary: fc.constantFrom(1, 2).map((g) => proposed(g, { ttlMs: 10_000 })) },
  {
    weight: 3,
    arbitrary: fc
      .record({ g: fc.constantFrom(1, 2), verdict: fc.constantFrom("ALLOW", "REQUIRE_WITNESS", "REQUIRE_WITNESS", "DENY") as fc.Arbitrary<"ALLOW" | "REQUIRE_WITNESS" | "DENY">, epoch: fc.integer({ min: 1, max: 3 }), contract: fc.constantFrom(...Contracts) })
      .map(({ g, verdict, epoch, contract }) => adjudicated(g, { verdict, policyEpoch: epoch, contract: verdict === "REQUIRE_WITNESS" ? contract : null }))
  },
  { weight: 1, arbitrary: fc.integer({ min: 2, max: 3 }).map(epochChanged) },
  {
    weight: 3,
    arbitrary: fc
      .record({ g: fc.constantFrom(1, 2), readiness: fc.constantFrom("satisfied", "satisfied", "unsatisfied", "stale") as fc.Arbitrary<"satisfied" | "unsatisfied" | "stale">, n: fc.nat(99) })
      .map(({ g, readiness, n }): HeldEvent => ({ type: "readiness.changed", event_id: `readiness.changed:${HeldId}:r${n}`, held_id: HeldId, generation: g, at: at(n), readiness, policy_epoch: 1 }))
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom<HeldEvent>(
      { type: "execution.leased", event_id: "execution.leased:1", held_id: HeldId, generation: 1, at: at(1), owner: "k1", lease_until: at(9999) },
      { type: "effect.dispatched", event_id: "effect.dispatched:1", held_id: HeldId, generation: 1, at: at(1), idempotency_key: "k", attempt: 1, owner: "k1", lease_until: at(9999), policy_epoch: 1 } as HeldEvent,
      { type: "effect.outcome_unknown", event_id: "effect.outcome_unknown:1", held_id: HeldId, generation: 1, at: at(1), idempotency_key: "k", reason: "lost", needs_witness: false },
      { type: "effect.readback", event_id: "effect.readback:1", held_id: HeldId, generation: 1, at: at(1), idempotency_key: "k", applied: false },
      { type: "call.cancelled", event_id: "call.cancelled:1", held_id: HeldId, generation: 1, at: at(1), by: "agent:alice", reason: "no", envelope: { payload: {}, key: "AAAA", sig: "AAAA" } },
      { type: "call.expired", event_id: "call.expired:1", held_id: HeldId, generation: 1, at: at(1) }
    )
  }
)

const scenarioArb = fc.record({
  events: fc.array(eventArb, { maxLength: 24 }).map((es) => [proposed(1, { ttlMs: 10_000 }), ...es]),
  now: fc.integer({ min: 0, max: 12_000 }),
  epoch: fc.integer({ min: 1, max: 3 }),
  /** A witness whose registration the policy in force dropped. */
  unregistered: fc.option(fc.constantFrom(...Witnesses), { nil: undefined })
})

const contextOf = (s: { now: number; epoch: number; unregistered: string | undefined }): ReconcileContext =>
  ctxAt(s.now, s.epoch, { classesOf: (p) => (p === s.unregistered ? [] : Registry[p] ?? []) })

/**
 * Invariant 2, derived independently from the raw events (not from the reducer's evidence):
 * lifecycle open, nothing dispatched, readiness satisfied for the current generation, the
 * epoch checked is the current one, the call unexpired, and for a witnessed call the rule
 * satisfied by approvals in force with no veto or revocation in force.
 */
const invariant2 = (f: HeldCallFacts, ctx: ReconcileContext, events: ReadonlyArray<HeldEvent>): boolean => {
  const spec = f.spec
  if (spec === null || f.lifecycle !== "open" || !(f.execution === "none" || f.execution === "leased")) return false
  if (f.readiness !== "satisfied" || f.policy_epoch_checked !== ctx.policyEpoch || f.policy_epoch > ctx.policyEpoch) return false
  if (Date.parse(spec.expires_at) <= ctx.now) return false
  if (f.verdict === "ALLOW") return true
  if (f.verdict !== "REQUIRE_WITNESS" || f.active_rule === null) return false
  const accepted = events.filter((e): e is Extract<HeldEvent, { type: "attestation.accepted" }> => e.type === "attestation.accepted")
  const revokedAfter = (w: string, g: number, issued: string) =>
    accepted.some((r) => r.decision === "revoke" && r.witness === w && r.generation === g && Date.parse(r.issued_at) >= Date.parse(issued))
  const inForce = accepted.filter(
    (e) =>
      e.generation === f.generation &&
      e.call_digest === spec.call_digest &&
      e.contract_digest === f.contract_digest &&
      Date.parse(e.expires_at) > ctx.now &&
      e.witness !== spec.principal &&
      ctx.classesOf(e.witness).includes(e.class) &&
      !(e.decision !== "revoke" && revokedAfter(e.witness, e.generation, e.issued_at))
  )
  const vetoed = inForce.some((e) => e.decision === "reject" && (f.witness_contract?.veto ?? []).includes(e.class))
  return !vetoed && satisfies(f.active_rule, inForce.filter((e) => e.decision === "approve"))
}

describe("mayDispatch is invariant 2, over random reachable facts", () => {
  it("is false unless every condition of invariant 2 holds (and is not vacuously false)", () => {
    let allowed = 0
    let eligible = 0
    fc.assert(
      fc.property(scenarioArb, (s) => {
        const facts = reduce(HeldId, sequenced(s.events))
        const ctx = contextOf(s)
        const may = mayDispatch(facts, ctx)
        const holds = invariant2(facts, ctx, s.events)
        if (may) allowed++
        if (holds) eligible++
        if (may) expect(holds).toBe(true)
      }),
      { numRuns: 1500 }
    )
    // the property saw both answers, not only "no", and mayDispatch is not far stricter than the invariant
    expect(allowed).toBeGreaterThan(10)
    expect(allowed).toBeGreaterThan(eligible / 3)
  })

  it("never holds for a call that is not open, already dispatched, or checked under another epoch", () => {
    fc.assert(
      fc.property(scenarioArb, fc.constantFrom<Partial<HeldCallFacts>>({ lifecycle: "cancelled" }, { lifecycle: "completed" }, { execution: "dispatched" }, { execution: "effect-recorded" }, { execution: "outcome-unknown" }, { readiness: "stale" }, { readiness: "unsatisfied" }), (s, broken) => {
        const facts = { ...reduce(HeldId, sequenced(s.events)), ...broken }
        expect(mayDispatch(facts, contextOf(s))).toBe(false)
        expect(mayDispatch(facts, { ...contextOf(s), policyEpoch: facts.policy_epoch_checked + 1 })).toBe(false)
      }),
      { numRuns: 300 }
    )
  })
})

describe("reconcile over random reachable facts", () => {
  it("reaches a fixed point: the next tick on its own result derives nothing", () => {
    fc.assert(
      fc.property(scenarioArb, (s) => {
        const facts = reduce(HeldId, sequenced(s.events))
        const ctx = contextOf(s)
        const plan = reconcile(facts, ctx)
        expect(plan.events.some((e) => e.type === "reconcile.bound_exceeded")).toBe(false)
        expect(reconcile(commit(facts, plan), ctx).events).toEqual([])
      }),
      { numRuns: 800 }
    )
  })

  it("asks for execution only when mayDispatch holds on the facts it returns", () => {
    fc.assert(
      fc.property(scenarioArb, (s) => {
        const ctx = contextOf(s)
        const plan = reconcile(reduce(HeldId, sequenced(s.events)), ctx)
        expect(plan.actions.some((a) => a.kind === "execute")).toBe(mayDispatch(plan.facts, ctx))
      }),
      { numRuns: 800 }
    )
  })
})

describe("delivery: republished with backoff until expiry plus grace, then stopped", () => {
  const parked = given(proposed(1, { ttlMs: 10_000 }), adjudicated(1), held(1))

  /** Runs the controller's loop on the pure core: reconcile, publish when asked, sleep the requeue. */
  const run = (retry: { baseMs: number; maxMs: number; graceMs: number }, ackAfter: number | null) => {
    let now = 10_000
    let f = fold(parked)
    const published: Array<number> = []
    for (let tick = 0; tick < 20_000; tick++) {
      const plan = reconcile(f, ctxAt(now, 1, { delivery: retry }))
      f = commit(f, plan)
      if (kinds(plan).includes("deliver")) {
        published.push(now)
        f = fold(f, { type: "delivery.published", event_id: `delivery.published:${HeldId}:d:a${published.length}`, held_id: HeldId, generation: 1, at: at(now), delivery_id: "d", attempt: published.length })
        if (ackAfter !== null && published.length === ackAfter)
          f = fold(f, { type: "delivery.acknowledged", event_id: `delivery.acknowledged:${HeldId}:d`, held_id: HeldId, generation: 1, at: at(now), delivery_id: "d", envelope: { payload: {}, key: "AAAA", sig: "AAAA" } })
        continue
      }
      if (plan.requeueMs === null) return { f, published, now }
      now += plan.requeueMs
    }
    throw new Error("delivery never quiesced")
  }

  it("each gap at least doubles up to the cap; nothing is published after the deadline; the stop is recorded once", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2_000 }), fc.integer({ min: 1, max: 20 }), fc.integer({ min: 0, max: 60_000 }), (baseMs, capFactor, graceMs) => {
        const retry = { baseMs, maxMs: baseMs * capFactor, graceMs }
        const { f, published } = run(retry, null)
        const deadline = 10_000 + graceMs
        // The first delivery is always made; republishes only before the deadline.
        expect(published[0]).toBe(10_000)
        for (const t of published.slice(1)) expect(t).toBeLessThan(deadline)
        for (let i = 1; i < published.length; i++) expect(published[i]! - published[i - 1]!).toBe(Math.min(retry.maxMs, baseMs * 2 ** (i - 1)))
        expect(f.delivery_stopped_at).toBe(at(Math.max(deadline, published.at(-1)!)))
        expect(f.continuation_delivery).toBe("delivered")
        expect(reconcile(f, ctxAt(10 * deadline, 1, { delivery: retry }))).toMatchObject({ events: [], actions: [], requeueMs: null })
      })
    )
  })

  it("an acknowledged delivery is never republished and never stopped", () => {
    const { f, published } = run({ baseMs: 100, maxMs: 1_000, graceMs: 60_000 }, 2)
    expect(published.length).toBe(2)
    expect(f).toMatchObject({ continuation_delivery: "acknowledged" })
    expect(f.delivery_stopped_at).toBeUndefined()
  })
})
