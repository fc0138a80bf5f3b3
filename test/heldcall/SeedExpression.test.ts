import { describe, expect, it } from "vitest"
import { mayDispatch, reconcile, vetoOf } from "../../runtime/heldcall/Reconciler.js"
import type { WitnessContract } from "../../runtime/schema/WitnessContract.js"
import { adjudicated, attestation, ctxAt, fold, given, held, proposed, Registry } from "./Given.js"

// The seed's example, as data: money_transfer requires (human approval AND fraud check) OR a
// break-glass operator, with a compliance veto. Every combination of the four witness kinds,
// with and without the veto, through the pure reducer and reconciler.
const rule = { any: [{ all: [{ class: "human" }, { class: "fraud" }] }, { class: "breakglass" }] } as const
const withVeto: WitnessContract = { rule, veto: ["compliance"] }
const withoutVeto: WitnessContract = { rule }
const registry: Record<string, ReadonlyArray<string>> = { ...Registry, "op:breakglass": ["breakglass"] }
const ctx = ctxAt(1_000, 1, { classesOf: (p) => registry[p] ?? [], principals: () => Object.keys(registry) })

const kinds = [
  { name: "human approves", witness: "user:carol", class: "human", decision: "approve" },
  { name: "fraud check approves", witness: "svc:fraud", class: "fraud", decision: "approve" },
  { name: "break-glass approves", witness: "op:breakglass", class: "breakglass", decision: "approve" },
  { name: "compliance rejects", witness: "compliance:zoe", class: "compliance", decision: "reject" }
] as const

const cases = [withVeto, withoutVeto].flatMap((contract) =>
  Array.from({ length: 16 }, (_, mask) => {
    const present = kinds.filter((_, i) => (mask & (1 << i)) !== 0)
    const has = (n: number) => (mask & (1 << n)) !== 0
    const vetoed = contract.veto !== undefined && has(3)
    const satisfied = (has(0) && has(1)) || has(2)
    return { contract, present, vetoed, runs: satisfied && !vetoed, label: `${contract.veto ? "veto" : "no veto"}: ${present.map((k) => k.name).join(" + ") || "no evidence"}` }
  })
)

describe("seed expression: (human AND fraud) OR breakglass, compliance veto", () => {
  it.each(cases)("$label", ({ contract, present, vetoed, runs }) => {
    const parked = given(proposed(1), adjudicated(1, { contract }), held(1, contract))
    const facts = fold(parked, ...present.map((k, i) => attestation({ witness: k.witness, class: k.class, decision: k.decision, issued: 100 + i, contract })))
    expect(vetoOf(facts, ctx) !== undefined).toBe(vetoed)
    // The controller's tick derives readiness; dispatch is allowed exactly when the rule holds.
    const plan = reconcile(facts, ctx)
    expect(mayDispatch(plan.facts, ctx)).toBe(runs)
    if (vetoed) expect(plan.facts).toMatchObject({ lifecycle: "denied", outcome: "denied" })
    else expect(plan.facts.lifecycle).toBe("open")
    if (runs) expect(plan.actions.map((a) => a.kind)).toContain("execute")
    else expect(plan.actions.map((a) => a.kind)).not.toContain("execute")
  })

  it("covers all 32 combinations", () => expect(cases).toHaveLength(32))
})
