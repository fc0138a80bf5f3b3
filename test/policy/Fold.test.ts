// The verdict fold is a join-semilattice: commutative, associative, idempotent, monotone.
import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { decide, emptyFold, foldAdmission, foldOpinions, join, joinContracts, ofOpinion, Rank, type AdmitOpinion, type Folded, type Opinion } from "../../runtime/policy/Fold.js"
import type { WitnessContract } from "../../runtime/schema/WitnessContract.js"

const contractArb: fc.Arbitrary<WitnessContract> = fc.record(
  {
    rule: fc.oneof(
      fc.record({ class: fc.constantFrom("human", "finance", "security") }),
      fc.record({ class: fc.constantFrom("human", "finance"), count: fc.integer({ min: 2, max: 3 }) }),
      fc.record({ principal: fc.constantFrom("carol", "dave") })
    ),
    veto: fc.option(fc.subarray(["security", "legal"]), { nil: undefined }),
    fallback: fc.option(fc.oneof(fc.record({ after_ms: fc.constantFrom(1000, 5000), action: fc.constant("deny" as const) }), fc.record({ after_ms: fc.constant(2000), action: fc.constant("route" as const), rule: fc.constant({ class: "human" }) })), { nil: undefined }),
    summary: fc.option(fc.constantFrom("a", "b"), { nil: undefined })
  },
  { requiredKeys: ["rule"] }
) as fc.Arbitrary<WitnessContract>

const opinionArb: fc.Arbitrary<Opinion> = fc.record(
  {
    by: fc.constantFrom("plugin:a@1", "plugin:b@1", "plugin:c@2"),
    verdict: fc.constantFrom("ALLOW", "REQUIRE_WITNESS", "DENY", "DEFER"),
    reason: fc.option(fc.constantFrom("too big", "new payee", "weekend"), { nil: undefined }),
    contract: fc.option(contractArb, { nil: undefined })
  },
  { requiredKeys: ["by", "verdict"] }
) as fc.Arbitrary<Opinion>

const foldArb: fc.Arbitrary<Folded> = fc.array(opinionArb, { maxLength: 5 }).map(foldOpinions)

describe("Fold", () => {
  it("join is commutative", () => fc.assert(fc.property(foldArb, foldArb, (a, b) => {
    expect(join(a, b)).toEqual(join(b, a))
  })))
  it("join is associative", () => fc.assert(fc.property(foldArb, foldArb, foldArb, (a, b, c) => {
    expect(join(join(a, b), c)).toEqual(join(a, join(b, c)))
  })))
  it("join is idempotent", () => fc.assert(fc.property(foldArb, (a) => {
    expect(join(a, a)).toEqual(a)
  })))
  it("DEFER (the empty fold) is the identity", () => fc.assert(fc.property(foldArb, (a) => {
    expect(join(a, emptyFold)).toEqual(a)
  })))

  it("plugin order never changes the decided outcome", () =>
    fc.assert(
      fc.property(fc.array(opinionArb, { maxLength: 7 }).chain((ops) => fc.tuple(fc.constant(ops), fc.shuffledSubarray(ops, { minLength: ops.length, maxLength: ops.length }))), ([ops, shuffled]) => {
        expect(decide(foldOpinions(shuffled))).toEqual(decide(foldOpinions(ops)))
      })
    ))

  it("the most restrictive verdict wins", () =>
    fc.assert(
      fc.property(fc.array(opinionArb, { minLength: 1, maxLength: 7 }), (ops) => {
        const max = ops.reduce((m, o) => (Rank[o.verdict] > Rank[m] ? o.verdict : m), "DEFER" as Opinion["verdict"])
        expect(decide(foldOpinions(ops)).verdict).toBe(max === "DEFER" ? "DENY" : max)
      })
    ))

  it("adding a plugin never widens a decided outcome", () =>
    fc.assert(
      fc.property(fc.array(opinionArb, { maxLength: 6 }), opinionArb, (ops, extra) => {
        const before = foldOpinions(ops)
        const after = join(before, ofOpinion(extra))
        expect(Rank[after.verdict]).toBeGreaterThanOrEqual(Rank[before.verdict])
        // Once anyone has an opinion the decided verdict can only stay or narrow.
        if (before.verdict !== "DEFER") expect(Rank[decide(after).verdict]).toBeGreaterThanOrEqual(Rank[decide(before).verdict])
        // A deferring plugin changes nothing.
        if (extra.verdict === "DEFER") expect(decide(after)).toEqual(decide(before))
      })
    ))

  it("all-defer (or no adjudicator at all) goes to the floor: deny", () => {
    expect(decide(emptyFold)).toEqual({ verdict: "DENY", reasons: [{ by: "floor", reason: expect.stringContaining("floor denies") }] })
    expect(decide(foldOpinions([{ by: "x", verdict: "DEFER" }])).verdict).toBe("DENY")
  })

  it("witness contracts are joined with all, in an order-free way", () => {
    const a: WitnessContract = { rule: { class: "finance" }, veto: ["security"] }
    const b: WitnessContract = { rule: { class: "human", count: 2 }, fallback: { after_ms: 1000, action: "deny" } }
    const j = joinContracts([a, b])
    expect(j).toEqual(joinContracts([b, a, a]))
    expect(j.rule).toEqual({ all: [{ class: "finance" }, { class: "human", count: 2 }] })
    expect(j.veto).toEqual(["security"])
    expect(j.fallback).toEqual({ after_ms: 1000, action: "deny" })
    const held = decide(foldOpinions([{ by: "p", verdict: "REQUIRE_WITNESS", contract: a }, { by: "q", verdict: "REQUIRE_WITNESS", contract: b }, { by: "r", verdict: "ALLOW" }]))
    expect(held.verdict).toBe("REQUIRE_WITNESS")
    expect(held.contract).toEqual(j)
  })

  it("a route fallback never survives a disagreement (it could lower the bar)", () => {
    const route: WitnessContract = { rule: { class: "finance" }, fallback: { after_ms: 10, action: "route", rule: { class: "human" } } }
    expect(joinContracts([route, { rule: { class: "security" } }]).fallback).toBeUndefined()
    expect(joinContracts([route, { ...route, veto: ["x"] }]).fallback).toEqual(route.fallback)
  })

  it("admission: any quarantine wins, whatever the order", () =>
    fc.assert(
      fc.property(
        fc.array(fc.record({ by: fc.constantFrom("plugin:a@1", "plugin:b@1"), verdict: fc.constantFrom("ADMIT", "QUARANTINE", "DEFER"), reason: fc.constantFrom("secret", "pii") }) as fc.Arbitrary<AdmitOpinion>, { maxLength: 6 }),
        (ops) => {
          const r = foldAdmission(ops)
          expect(r).toEqual(foldAdmission([...ops].reverse()))
          expect(r.admitted).toBe(!ops.some((o) => o.verdict === "QUARANTINE"))
        }
      )
    ))
})
