import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { countingApprovals, currentPresentationDigest, outlookOf } from "../../runtime/heldcall/Counting.js"
import { mayDispatch, reconcile } from "../../runtime/heldcall/Reconciler.js"
import type { EventOf } from "../../runtime/schema/Events.js"
import type { HeldCallFacts } from "../../runtime/schema/Facts.js"
import type { WitnessContract } from "../../runtime/schema/WitnessContract.js"
import { adjudicated, attestation, ctxAt, fold, given, held, proposed, Registry, TestKey, type Statement } from "./Given.js"

fc.configureGlobal({ seed: Number(process.env["WK_FC_SEED"] ?? 8785) })

// Evidence is decided again at readiness: against the registry in force, once per principal,
// with a reject (or revoke) final for its witness, and a rule no one left can meet ends the call.

const parkedWith = (contract: WitnessContract) => given(proposed(), adjudicated(1, { contract }), held(1, contract))
/** An accepted attestation under `contract`, with the witness's reason and presentation digest when given. */
const say = (contract: WitnessContract, s: Omit<Statement, "contract" | "issued" | "rejected"> & { issued?: number; reason?: string; presentation_digest?: string }): EventOf<"attestation.accepted"> => {
  const { reason, presentation_digest, ...rest } = s
  const e = attestation({ issued: 100, ...rest, contract }) as EventOf<"attestation.accepted">
  return { ...e, ...(reason !== undefined ? { reason } : {}), ...(presentation_digest !== undefined ? { presentation_digest } : {}) }
}
/** Reconciles to the fixed point and folds the local events back, as the driver does. */
const settle = (f: HeldCallFacts, ctx = ctxAt(1_000)) => {
  const plan = reconcile(f, ctx)
  return { ...plan, facts: fold(f, ...plan.events) }
}

describe("the registry in force decides, at readiness", () => {
  const twoHumans: WitnessContract = { rule: { class: "human", count: 2 } }

  it("given two human approvals, when the admin removes carol's key, then her approval stops counting and nothing may run", () => {
    const f = fold(parkedWith(twoHumans), say(twoHumans, { witness: "user:carol", decision: "approve" }), say(twoHumans, { witness: "user:dave", decision: "approve" }))
    expect(settle(f).actions).toEqual([{ kind: "execute" }])
    const keyRemoved = ctxAt(1_000, 1, { keysOf: (p) => (p === "user:carol" ? ["BBBB"] : [TestKey]) })
    expect(countingApprovals(f, keyRemoved).map((e) => e.witness)).toEqual(["user:dave"])
    const plan = settle(f, keyRemoved)
    expect(plan.facts).toMatchObject({ lifecycle: "open", readiness: "unsatisfied" })
    expect(mayDispatch(plan.facts, keyRemoved)).toBe(false)
  })

  it("given the same facts, when asked under one registry and then another, and back, then each answer is the registry's own", () => {
    const f = fold(parkedWith(twoHumans), say(twoHumans, { witness: "user:carol", decision: "approve" }), say(twoHumans, { witness: "user:dave", decision: "approve" }))
    const inForce = ctxAt(1_000)
    const keyRemoved = ctxAt(1_000, 1, { keysOf: (p) => (p === "user:carol" ? ["BBBB"] : [TestKey]) })
    const carolRejects = fold(f, say(twoHumans, { witness: "user:carol", decision: "reject", issued: 200 }))
    for (let round = 0; round < 2; round++) {
      expect(outlookOf(f, inForce).status).toBe("satisfied")
      expect(outlookOf(f, keyRemoved).status).toBe("pending")
      expect(outlookOf(carolRejects, inForce).refusals.map((r) => r.witness)).toEqual(["user:carol"])
      expect(outlookOf(carolRejects, keyRemoved).refusals).toEqual([])
    }
  })

  it("given an approval, when its witness no longer holds the class, then it stops counting", () => {
    const f = fold(parkedWith(twoHumans), say(twoHumans, { witness: "user:carol", decision: "approve" }), say(twoHumans, { witness: "user:dave", decision: "approve" }))
    const demoted = ctxAt(1_000, 1, { classesOf: (p) => (p === "user:dave" ? [] : Registry[p] ?? []) })
    expect(settle(f, demoted).facts.readiness).toBe("unsatisfied")
  })

  it("given one principal holding human and fraud, when it approves under both, then (human AND fraud) is not met", () => {
    const both: WitnessContract = { rule: { all: [{ class: "human" }, { class: "fraud" }] } }
    const ctx = ctxAt(1_000, 1, { classesOf: (p) => (p === "user:carol" ? ["human", "fraud"] : Registry[p] ?? []) })
    const f = fold(parkedWith(both), say(both, { witness: "user:carol", class: "human", decision: "approve" }), say(both, { witness: "user:carol", class: "fraud", decision: "approve" }))
    expect(settle(f, ctx).facts.readiness).toBe("unsatisfied")
    expect(settle(fold(f, say(both, { witness: "svc:fraud", decision: "approve" })), ctx).actions).toEqual([{ kind: "execute" }])
  })

  it("given an approval, when the registry places its witness in the proposer's session namespace, then it stops counting", () => {
    const f = fold(parkedWith(twoHumans), say(twoHumans, { witness: "user:carol", decision: "approve" }), say(twoHumans, { witness: "user:dave", decision: "approve" }))
    // The proposer (agent:alice) acts in namespace "alice"; carol is now registered there too.
    const sameNamespace = ctxAt(1_000, 1, { namespaceOf: (p) => (p === "agent:alice" || p === "user:carol" ? "alice" : undefined) })
    expect(countingApprovals(f, sameNamespace).map((e) => e.witness)).toEqual(["user:dave"])
    const plan = settle(f, sameNamespace)
    expect(plan.facts).toMatchObject({ lifecycle: "open", readiness: "unsatisfied" })
    expect(mayDispatch(plan.facts, sameNamespace)).toBe(false)
    // Another namespace is independent: both count.
    const other = ctxAt(1_000, 1, { namespaceOf: (p) => (p === "agent:alice" ? "alice" : p === "user:carol" ? "carol" : undefined) })
    expect(settle(f, other).actions).toEqual([{ kind: "execute" }])
  })

  it("given an approval bound to a presentation other than the one shown now, then it does not count", () => {
    const human: WitnessContract = { rule: { class: "human" } }
    const f = fold(parkedWith(human), say(human, { witness: "user:carol", decision: "approve", presentation_digest: "0".repeat(64) }))
    expect(settle(f).facts.readiness).toBe("unsatisfied")
    const shown = fold(parkedWith(human), say(human, { witness: "user:carol", decision: "approve", presentation_digest: currentPresentationDigest(parkedWith(human))! }))
    expect(settle(shown).actions).toEqual([{ kind: "execute" }])
  })
})

describe("three-valued rules: a reject is final for its witness", () => {
  const human: WitnessContract = { rule: { class: "human" } }

  it("given a human rule, when carol rejects, then it is pending on the other humans, and her later approval does not count", () => {
    const f = fold(parkedWith(human), say(human, { witness: "user:carol", decision: "reject", issued: 100 }))
    expect(outlookOf(f, ctxAt(1_000)).status).toBe("pending")
    const again = fold(f, say(human, { witness: "user:carol", decision: "approve", issued: 200 }))
    expect(settle(again).facts).toMatchObject({ lifecycle: "open", readiness: "unsatisfied" })
    expect(settle(fold(again, say(human, { witness: "user:dave", decision: "approve" }))).actions).toEqual([{ kind: "execute" }])
  })

  it("given a rule only carol can meet, when carol rejects with a reason, then the call is denied at once, naming her and her reason", () => {
    const onlyCarol: WitnessContract = { rule: { principal: "user:carol" } }
    const plan = settle(fold(parkedWith(onlyCarol), say(onlyCarol, { witness: "user:carol", decision: "reject", reason: "the payee is unknown" })))
    expect(plan.facts.lifecycle).toBe("denied")
    expect(plan.facts.reasons).toEqual([{ by: "user:carol", reason: "reject by human witness user:carol: the payee is unknown" }])
  })

  it("given (human AND fraud), when the only fraud witness rejects, then it is denied though humans approved", () => {
    const both: WitnessContract = { rule: { all: [{ class: "human" }, { class: "fraud" }] } }
    const f = fold(parkedWith(both), say(both, { witness: "user:carol", decision: "approve" }), say(both, { witness: "svc:fraud", decision: "reject" }))
    expect(settle(f).facts).toMatchObject({ lifecycle: "denied", reasons: [{ by: "svc:fraud", reason: "reject by fraud witness svc:fraud" }] })
  })

  it("given carol's approval, when she revokes, then a rule only she can meet is denied (a revoke is final for the generation)", () => {
    const onlyCarol: WitnessContract = { rule: { principal: "user:carol" } }
    const f = fold(parkedWith(onlyCarol), say(onlyCarol, { witness: "user:carol", decision: "approve", issued: 100 }), say(onlyCarol, { witness: "user:carol", decision: "revoke", issued: 200 }))
    expect(settle(f).facts).toMatchObject({ lifecycle: "denied", reasons: [{ by: "user:carol", reason: "approval revoked by human witness user:carol" }] })
  })

  it("given a rule no registered principal can meet, then the call is denied, saying so", () => {
    const nobody: WitnessContract = { rule: { class: "auditor" } }
    expect(settle(parkedWith(nobody)).facts).toMatchObject({ lifecycle: "denied", reasons: [{ by: "kernel", reason: "no registered witnesses can satisfy the witness rule" }] })
  })

  it("given a route fallback to a rule that can still be met, then the call waits for it", () => {
    const routed: WitnessContract = { rule: { principal: "user:carol" }, fallback: { after_ms: 5_000, action: "route", rule: { class: "human" } } }
    const f = fold(parkedWith(routed), say(routed, { witness: "user:carol", decision: "reject" }))
    expect(settle(f).facts.lifecycle).toBe("open")
    const later = settle(settle(f, ctxAt(6_000)).facts, ctxAt(6_000))
    expect(later.facts).toMatchObject({ lifecycle: "open", active_rule: { class: "human" } })
    expect(settle(fold(later.facts, say(routed, { witness: "user:dave", decision: "approve" })), ctxAt(6_000)).actions).toEqual([{ kind: "execute" }])
  })
})

describe("final noes, over random statements (properties)", () => {
  const human: WitnessContract = { rule: { class: "human", count: 2 } }
  const statementArb = fc.record({
    witness: fc.constantFrom<string>("user:carol", "user:dave", "user:erin"),
    decision: fc.constantFrom("approve", "reject", "revoke") as fc.Arbitrary<"approve" | "reject" | "revoke">,
    // Claimed issue times anywhere from well before to well after the others (a future issued_at included).
    issued: fc.integer({ min: 0, max: 120_000 }),
    nonce: fc.string({ minLength: 8, maxLength: 8 })
  })

  it("a witness with a reject or a revoke of the generation never counts, whatever the order and the claimed times", () => {
    fc.assert(
      fc.property(fc.array(statementArb, { maxLength: 8 }), (statements) => {
        const f = fold(parkedWith(human), ...statements.map((st) => say(human, st)))
        const refused = new Set(statements.filter((st) => st.decision !== "approve").map((st) => st.witness))
        const counted = countingApprovals(f, ctxAt(1_000)).map((e) => e.witness)
        expect(counted.filter((w) => refused.has(w))).toEqual([])
        // and any witness without a no, whose approval is unexpired, counts
        for (const st of statements) if (st.decision === "approve" && !refused.has(st.witness)) expect(counted).toContain(st.witness)
      })
    )
  })

  it("the outcome does not depend on the order the statements arrive in", () => {
    fc.assert(
      fc.property(fc.array(statementArb, { maxLength: 6 }).chain((xs) => fc.tuple(fc.constant(xs), fc.shuffledSubarray(xs, { minLength: xs.length, maxLength: xs.length }))), ([a, b]) => {
        const [fa, fb] = [a, b].map((xs) => settle(fold(parkedWith(human), ...xs.map((st) => say(human, st)))).facts)
        expect(fb!.lifecycle).toBe(fa!.lifecycle)
        expect(fb!.readiness).toBe(fa!.readiness)
        expect(fb!.reasons).toEqual(fa!.reasons)
      })
    )
  })
})
