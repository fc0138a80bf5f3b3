import { describe, expect, it } from "vitest"
import fc from "fast-check"
import type { EventOf, HeldEvent } from "../../runtime/schema/Events.js"
import type { HeldCallFacts } from "../../runtime/schema/Facts.js"
import { checkEdge, DefaultMaxDependencyDepth, failedDependency, maxDependencyDepth, openDependencies } from "../../runtime/heldcall/Dependencies.js"
import { reconcile, mayDispatch } from "../../runtime/heldcall/Reconciler.js"
import { reduce } from "../../runtime/heldcall/Reducer.js"
import { adjudicated, at, attestation, ctxAt, digestOf, fold, given, held, HeldId, proposed, Proposer, sequenced } from "./Given.js"
import type { WitnessContract } from "../../runtime/schema/WitnessContract.js"

fc.configureGlobal({ seed: Number(process.env["WK_FC_SEED"] ?? 8785) })

const child = (n: number) => `h_child${String(n).padStart(26, "0")}`
type Outcome = EventOf<"dependency.resolved">["outcome"]

const added = (c: string, by: string = Proposer, generation = 1): EventOf<"dependency.added"> => ({
  type: "dependency.added", event_id: `dependency.added:${HeldId}:${c}`, held_id: HeldId, generation, at: at(5),
  child_held_id: c, call_digest: "d".repeat(64), principal: by
})
const resolved = (c: string, outcome: Outcome = "completed", reason = "no"): EventOf<"dependency.resolved"> => ({
  type: "dependency.resolved", event_id: `dependency.resolved:${HeldId}:${c}`, held_id: HeldId, generation: 1, at: at(6),
  child_held_id: c, outcome, reasons: outcome === "completed" ? [] : [{ by: "kernel", reason }]
})
const refused = (c: string, reason: string, by?: string): EventOf<"dependency.refused"> => ({
  type: "dependency.refused", event_id: `dependency.refused:${HeldId}:${c}`, held_id: HeldId, generation: 1, at: at(5),
  child_held_id: c, call_digest: "e".repeat(64), reason, ...(by !== undefined ? { principal: by } : {})
})

/** A held transfer whose human witness already approved: only its dependencies can keep it parked. */
const approvedParent = (...deps: ReadonlyArray<HeldEvent>): HeldCallFacts =>
  given(proposed(), adjudicated(), held(), attestation({ witness: "user:carol", decision: "approve", issued: 100 }), ...deps)

/** Reconciles to the fixed point and folds the local events back, as the driver does. */
const settle = (f: HeldCallFacts, nowMs = 1_000) => {
  const plan = reconcile(f, ctxAt(nowMs))
  return { ...plan, facts: fold(f, ...plan.events) }
}

describe("dependency readiness (given / when / then)", () => {
  it("a pending dependency keeps an approved call unsatisfied and undispatchable; no worker is asked to wait", () => {
    const plan = settle(approvedParent(added(child(1))))
    expect(plan.facts.readiness).toBe("unsatisfied")
    expect(plan.actions).toEqual([])
    expect(mayDispatch(plan.facts, ctxAt(1_000))).toBe(false)
  })

  it("when the dependency completes, the call becomes satisfied and executes", () => {
    const plan = settle(approvedParent(added(child(1)), resolved(child(1))))
    expect(plan.facts.readiness).toBe("satisfied")
    expect(plan.actions).toEqual([{ kind: "execute" }])
  })

  it("an ALLOW call that gains a dependency goes unsatisfied until it ends", () => {
    const f = given(proposed(), added(child(1)), adjudicated(1, { verdict: "ALLOW" }))
    expect(f.readiness).toBe("unsatisfied")
    expect(settle(f).actions).toEqual([])
    expect(settle(fold(f, resolved(child(1)))).actions).toEqual([{ kind: "execute" }])
  })

  it.each(["denied", "expired", "cancelled"] as const)("a dependency that ends %s denies the parent, naming it", (outcome) => {
    const plan = settle(approvedParent(added(child(1)), resolved(child(1), outcome, "why")))
    expect(plan.facts.lifecycle).toBe("denied")
    expect(plan.facts.reasons).toEqual([{ by: "kernel", reason: `dependency ${child(1)} ended ${outcome}: why` }])
  })

  it("a refused edge denies the parent with the refusal reason", () => {
    const plan = settle(approvedParent(refused(child(2), "dependency depth 5 exceeds max_dependency_depth 4")))
    expect(plan.facts.reasons).toEqual([{ by: "kernel", reason: "dependency depth 5 exceeds max_dependency_depth 4" }])
  })

  it("a refused edge of an older kernel's log (no principal recorded) counts as the proposer's: it denies the parent", () => {
    expect(settle(approvedParent(refused(child(2), "no"))).facts.lifecycle).toBe("denied")
  })

  it("a child that ended asks to report to its parent once; after dependency.reported it does not", () => {
    const childFacts = reduce(child(1), sequenced([
      { ...proposed(), held_id: child(1), event_id: `call.proposed:${child(1)}:g1`, parent_held_id: HeldId, ancestors: [{ held_id: HeldId, call_digest: digestOf(1) }] },
      { type: "call.denied", event_id: `call.denied:${child(1)}:g1`, held_id: child(1), generation: 1, at: at(2), reasons: [{ by: "kernel", reason: "no" }] }
    ]))
    expect(reconcile(childFacts, ctxAt(10)).actions).toContainEqual({ kind: "report" })
    const reported = reduce(child(1), sequenced([{ type: "dependency.reported", event_id: `dependency.reported:${child(1)}:${HeldId}`, held_id: child(1), generation: 1, at: at(3), parent_held_id: HeldId }], childFacts.last_seq + 1), childFacts)
    expect(reconcile(reported, ctxAt(10)).actions).not.toContainEqual({ kind: "report" })
  })
})

describe("a witness's nested call counts at most as that witness's reject (given / when / then)", () => {
  const parkedWith = (contract: WitnessContract, ...events: ReadonlyArray<HeldEvent>) =>
    given(proposed(), adjudicated(1, { contract }), held(1, contract), ...events)
  const humans: WitnessContract = { rule: { class: "human" }, veto: ["compliance"] }

  it.each(["denied", "expired", "cancelled"] as const)("given a human witness's child that ended %s, when other humans can still approve, then the parent stays open and an approval releases it", (outcome) => {
    const f = parkedWith(humans, added(child(1), "user:dave"), resolved(child(1), outcome, "why"))
    const plan = settle(f)
    expect(plan.facts).toMatchObject({ lifecycle: "open", readiness: "unsatisfied" })
    const approved = settle(fold(plan.facts, attestation({ witness: "user:carol", decision: "approve", issued: 100, contract: humans })))
    expect(approved.actions).toEqual([{ kind: "execute" }])
  })

  it("given a witness's refused edge, when that witness later approves, then its approval does not count (its no is final)", () => {
    const f = parkedWith(humans, refused(child(1), "dependency cycle", "user:dave"), attestation({ witness: "user:dave", decision: "approve", issued: 100, contract: humans }))
    expect(settle(f).facts).toMatchObject({ lifecycle: "open", readiness: "unsatisfied" })
  })

  it("given the only witness the rule names, when its child is denied, then the rule cannot be met and the parent is denied naming it", () => {
    const onlyDave: WitnessContract = { rule: { principal: "user:dave" } }
    const plan = settle(parkedWith(onlyDave, added(child(1), "user:dave"), resolved(child(1), "denied", "no grant")))
    expect(plan.facts.lifecycle).toBe("denied")
    expect(plan.facts.reasons).toEqual([{ by: "user:dave", reason: `dependency ${child(1)} ended denied: no grant` }])
  })

  it("given a veto-class witness, when its child is refused, then that is its veto", () => {
    const plan = settle(parkedWith(humans, refused(child(1), "dependency depth 5 exceeds max_dependency_depth 4", "compliance:zoe")))
    expect(plan.facts.lifecycle).toBe("denied")
    expect(plan.facts.reasons).toEqual([{ by: "compliance:zoe", reason: "veto by witness compliance:zoe: dependency depth 5 exceeds max_dependency_depth 4" }])
  })

  it("given a witness's child attached under an older generation, then it is no reject of the current one", () => {
    const onlyDave: WitnessContract = { rule: { principal: "user:dave" } }
    const f = given(proposed(1), added(child(1), "user:dave", 1), resolved(child(1), "denied"), proposed(2), adjudicated(2, { contract: onlyDave }), held(2, onlyDave))
    expect(settle(f).facts.lifecycle).toBe("open")
  })
})

describe("edge checks", () => {
  const parentAt = (ancestors: ReadonlyArray<{ held_id: string; call_digest: string }>) => given({ ...proposed(), ancestors, parent_held_id: ancestors.at(-1)?.held_id ?? "h_root" })

  it("the bound is the smallest across profiles, default 4", () => {
    expect(maxDependencyDepth([])).toBe(DefaultMaxDependencyDepth)
    expect(maxDependencyDepth([{ max_dependency_depth: 3 }, {}, { max_dependency_depth: 1 }])).toBe(1)
  })

  it("a child at the bound is allowed; one over it is refused naming the bound", () => {
    const root = given(proposed())
    expect(checkEdge(root, { held_id: child(1), call_digest: "1".repeat(64) }, 1)).toMatchObject({ _tag: "Allowed", depth: 1 })
    const deep = parentAt([{ held_id: "h_r", call_digest: "r".repeat(64) }])
    expect(checkEdge(deep, { held_id: child(1), call_digest: "1".repeat(64) }, 1)).toEqual({ _tag: "Refused", reason: "dependency depth 2 exceeds max_dependency_depth 1" })
    expect(checkEdge(root, { held_id: child(1), call_digest: "1".repeat(64) }, 0)._tag).toBe("Refused")
  })

  it("a child whose held id is already in the chain is a cycle, named from where it loops", () => {
    const f = parentAt([{ held_id: "h_a", call_digest: "a".repeat(64) }, { held_id: "h_b", call_digest: "b".repeat(64) }])
    const r = checkEdge(f, { held_id: "h_b", call_digest: "x".repeat(64) }, 8)
    expect(r).toMatchObject({ _tag: "Refused" })
    expect(r._tag === "Refused" && r.reason).toMatch(new RegExp(`^dependency cycle: h_b -> ${HeldId} -> h_b`))
    expect(checkEdge(f, { held_id: HeldId, call_digest: "x".repeat(64) }, 8)._tag).toBe("Refused")
  })

  it("a child proposing a call already in the chain (same digest) under a new held id is no cycle", () => {
    const f = parentAt([{ held_id: "h_a", call_digest: "a".repeat(64) }])
    expect(checkEdge(f, { held_id: child(9), call_digest: "a".repeat(64) }, 8)._tag).toBe("Allowed")
    expect(checkEdge(f, { held_id: child(9), call_digest: digestOf(1) }, 8)._tag).toBe("Allowed")
  })
})

describe("dependency facts are order- and duplicate-independent (property)", () => {
  // One child has one proposer: the parent's proposer, a human witness, or a veto-class witness.
  const attacher = (i: number) => [Proposer, "user:dave", "compliance:zoe"][i - 1]!
  const depEventArb: fc.Arbitrary<HeldEvent> = fc.oneof(
    fc.integer({ min: 1, max: 3 }).map((i) => added(child(i), attacher(i))),
    fc.tuple(fc.integer({ min: 1, max: 3 }), fc.constantFrom<Outcome>("completed", "denied", "expired", "cancelled")).map(([i, o]) => resolved(child(i), o)),
    fc.integer({ min: 1, max: 3 }).map((i) => refused(child(i), `refused ${i}`, attacher(i)))
  )
  // One cause is one event: a child ends once, so its resolved event is fixed per child.
  const consistent = (events: ReadonlyArray<HeldEvent>): Array<HeldEvent> => {
    const outcome = new Map<string, Outcome>()
    return events.map((e) => {
      if (e.type !== "dependency.resolved") return e
      if (!outcome.has(e.child_held_id)) outcome.set(e.child_held_id, e.outcome)
      return resolved(e.child_held_id, outcome.get(e.child_held_id)!)
    })
  }

  it("any order and any duplicates of dependency events give the same dependencies, readiness and denial", () => {
    fc.assert(
      fc.property(
        fc.array(depEventArb, { minLength: 1, maxLength: 10 }).map(consistent).chain((events) =>
          fc.tuple(fc.constant(events), fc.shuffledSubarray([...events, ...events], { minLength: events.length * 2, maxLength: events.length * 2 }))
        ),
        ([events, shuffled]) => {
          const base = [proposed(), adjudicated(), held(), attestation({ witness: "user:carol", decision: "approve", issued: 100 })]
          const a = given(...base, ...events)
          const b = given(...base, ...shuffled)
          expect(b.dependencies).toEqual(a.dependencies)
          expect(openDependencies(b)).toEqual(openDependencies(a))
          expect(failedDependency(b)).toEqual(failedDependency(a))
          const [pa, pb] = [settle(a), settle(b)]
          expect(pb.facts.readiness).toEqual(pa.facts.readiness)
          expect(pb.facts.lifecycle).toEqual(pa.facts.lifecycle)
          expect(pb.facts.reasons).toEqual(pa.facts.reasons)
          expect(pb.actions).toEqual(pa.actions)
        }
      )
    )
  })

  it("dependency events interleaved anywhere among the call's own events give the same facts", () => {
    fc.assert(
      fc.property(fc.array(depEventArb, { minLength: 1, maxLength: 6 }).map(consistent), fc.array(fc.nat(), { minLength: 6, maxLength: 6 }), (deps, positions) => {
        const own: Array<HeldEvent> = [proposed(), adjudicated(), held(), attestation({ witness: "user:carol", decision: "approve", issued: 100 })]
        const mixed = [...own]
        deps.forEach((d, i) => mixed.splice(1 + (positions[i]! % mixed.length), 0, d))
        expect(given(...mixed).dependencies).toEqual(given(...own, ...deps).dependencies)
        expect(settle(given(...mixed)).facts.lifecycle).toEqual(settle(given(...own, ...deps)).facts.lifecycle)
      })
    )
  })
})
