import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { countingApprovals, mayDispatch, reconcile } from "../../runtime/heldcall/Reconciler.js"
import { satisfies } from "../../runtime/heldcall/WitnessRuleEval.js"
import { callDigest } from "../../runtime/schema/Canonical.js"
import type { EventOf } from "../../runtime/schema/Events.js"
import type { WitnessContract, WitnessRule } from "../../runtime/schema/WitnessContract.js"
import { HeldId, HumanContract, Registry, adjudicated, at, attestation, ctxAt, fold, given, held, proposed } from "./Given.js"

fc.configureGlobal({ seed: Number(process.env["WK_FC_SEED"] ?? 8785) })

const newCall = { tool: "wire_transfer", args: { from: "acct-a", to: "acct-b", amount: 1500 } }
const newDigest = callDigest(newCall.tool, newCall.args)

const represented = (generation: number): EventOf<"call.represented"> => ({
  type: "call.represented",
  event_id: `call.represented:${HeldId}:g${generation}`,
  held_id: HeldId,
  generation,
  at: at(20),
  from_call_digest: "x".repeat(64),
  call_digest: newDigest,
  policy_epoch: 2
})

/** The re-adjudication that comes with a re-presentation: the same contract, another canonical call. */
const readjudicated = (generation: number): EventOf<"call.adjudicated"> => ({
  ...adjudicated(generation, { policyEpoch: 2 }),
  executed: { ...newCall, call_digest: newDigest }
})

describe("re-presentation: one generation presents one canonical call", () => {
  const approvedG1 = given(proposed(1), adjudicated(1), held(1), attestation({ witness: "user:carol", decision: "approve", issued: 5 }))

  it("given an approved generation 1, when the kernel re-presents it as generation 2, then the old approval no longer counts and nothing may run", () => {
    const f = fold(approvedG1, represented(2), readjudicated(2), held(2))
    expect(f).toMatchObject({ generation: 2, proposed_generation: 1, verdict: "REQUIRE_WITNESS", executed: { call_digest: newDigest } })
    expect(f.spec?.call_digest).toBe(approvedG1.spec?.call_digest)
    const ctx = ctxAt(1000, 2)
    expect(countingApprovals(f, ctx)).toEqual([])
    const plan = reconcile(f, ctx)
    expect(plan.facts.readiness).not.toBe("satisfied")
    expect(mayDispatch(plan.facts, ctx)).toBe(false)
  })

  it("a re-presentation of any other generation than the next changes nothing", () => {
    expect(fold(approvedG1, represented(3))).toMatchObject({ generation: 1, verdict: "REQUIRE_WITNESS" })
    expect(fold(approvedG1, represented(1)).generation).toBe(1)
  })

  it("the agent's next proposal is its own generation again", () => {
    const f = fold(approvedG1, represented(2), readjudicated(2), proposed(3))
    expect(f.generation).toBe(3)
    expect(f.proposed_generation).toBeUndefined()
  })
})

// Routes only narrow: whatever the route, the approvals that count are a subset of those that
// count without it, so a rule satisfied with a route is satisfied without it.
const principals = Object.keys(Registry)
const classes = [...new Set(Object.values(Registry).flat())]
const leaf: fc.Arbitrary<WitnessRule> = fc.oneof(fc.constantFrom(...principals).map((principal) => ({ principal })), fc.constantFrom(...classes).map((c) => ({ class: c })))
const rule: fc.Arbitrary<WitnessRule> = fc.letrec<{ r: WitnessRule }>((tie) => ({
  r: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    leaf,
    fc.array(tie("r"), { minLength: 1, maxLength: 3 }).map((all) => ({ all })),
    fc.array(tie("r"), { minLength: 1, maxLength: 3 }).map((any) => ({ any })),
    fc.array(tie("r"), { minLength: 1, maxLength: 3 }).chain((of) => fc.integer({ min: 1, max: of.length }).map((n) => ({ quorum: { n, of } })))
  )
})).r
const statements = fc.array(fc.constantFrom(...principals.filter((p) => p !== "agent:alice")), { maxLength: 6 }).map((ws) =>
  ws.flatMap((witness, i) => (Registry[witness] ?? []).map((klass) => ({ witness, class: klass, decision: "approve" as const, issued: i + 1, nonce: `${witness}-${klass}-${i}` })))
)

describe("routes only narrow", () => {
  it("property: with any route, the counting approvals are a subset and the rule is never satisfied where it was not", () => {
    fc.assert(
      fc.property(rule, rule, statements, (contractRule, route, said) => {
        const facts = (contract: WitnessContract) => given(proposed(1), adjudicated(1, { contract }), held(1, contract), ...said.map((s) => attestation({ ...s, contract })))
        const ctx = ctxAt(1000)
        const open = countingApprovals(facts({ ...HumanContract, rule: contractRule }), ctx)
        const routed = countingApprovals(facts({ ...HumanContract, rule: contractRule, route }), ctx)
        expect(routed.every((a) => open.some((b) => b.witness === a.witness && b.class === a.class))).toBe(true)
        if (satisfies(contractRule, routed)) expect(satisfies(contractRule, open)).toBe(true)
      }),
      { numRuns: 300 }
    )
  })
})
