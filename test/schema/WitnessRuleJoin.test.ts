import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { satisfies, type Approval } from "../../runtime/heldcall/WitnessRuleEval.js"
import { canonicalize } from "../../runtime/schema/Canonical.js"
import { conjunctsOf, joinRules, missingConjuncts, type WitnessRule } from "../../runtime/schema/WitnessRule.js"

// joinRules is how the fold joins the witness contracts of several adjudicators and rules: every
// rule must hold, and making one of them stricter never makes the join looser.

const classes = ["human", "fraud", "finance"] as const
const rule: fc.Arbitrary<WitnessRule> = fc.letrec<{ rule: WitnessRule }>((tie) => ({
  rule: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.record({ class: fc.constantFrom(...classes), count: fc.option(fc.integer({ min: 1, max: 2 }), { nil: undefined }) }).map((r) => (r.count === undefined ? { class: r.class } : { class: r.class, count: r.count })),
    fc.constantFrom("user:carol", "svc:fraud").map((principal) => ({ principal })),
    fc.array(tie("rule"), { minLength: 1, maxLength: 2 }).map((all) => ({ all })),
    fc.array(tie("rule"), { minLength: 1, maxLength: 2 }).map((any) => ({ any })),
    fc.array(tie("rule"), { minLength: 1, maxLength: 2 }).chain((of) => fc.integer({ min: 1, max: of.length }).map((n) => ({ quorum: { n, of } })))
  )
})).rule

// Every approval set from this pool: two principals of each class, Carol human and the fraud service named.
const pool: ReadonlyArray<Approval> = [
  { witness: "user:carol", class: "human" },
  { witness: "user:dave", class: "human" },
  { witness: "svc:fraud", class: "fraud" },
  { witness: "svc:fraud2", class: "fraud" },
  { witness: "fin:fay", class: "finance" },
  { witness: "fin:finn", class: "finance" }
]
const approvalSets = Array.from({ length: 1 << pool.length }, (_, m) => pool.filter((_, i) => (m & (1 << i)) !== 0))
/** The approval sets that meet a rule, as a bit mask per set. */
const meets = (r: WitnessRule): ReadonlyArray<boolean> => approvalSets.map((s) => satisfies(r, s))
const implies = (a: ReadonlyArray<boolean>, b: ReadonlyArray<boolean>) => a.every((x, i) => !x || b[i])

describe("joinRules", () => {
  it("is a join: order, repetition and grouping never change it", () => {
    fc.assert(
      fc.property(rule, rule, rule, (a, b, c) => {
        const key = (r: WitnessRule) => canonicalize(r)
        expect(key(joinRules([a, b]))).toBe(key(joinRules([b, a])))
        expect(key(joinRules([a, a, b]))).toBe(key(joinRules([a, b])))
        expect(key(joinRules([joinRules([a, b]), c]))).toBe(key(joinRules([a, joinRules([b, c])])))
      }),
      { numRuns: 300 }
    )
  })

  it("one rule joined alone is met by the same approvals as the rule", () => {
    fc.assert(fc.property(rule, (r) => {
        expect(meets(joinRules([r]))).toEqual(meets(r))
      }), { numRuns: 150 })
  })

  it("every approval set that meets the join meets each rule", () => {
    fc.assert(
      fc.property(rule, rule, (a, b) => {
        const j = meets(joinRules([a, b]))
        expect(implies(j, meets(a))).toBe(true)
        expect(implies(j, meets(b))).toBe(true)
      }),
      { numRuns: 150 }
    )
  })

  it("is monotone: a rule that asks for every place another asks for never loosens the join", () => {
    fc.assert(
      fc.property(rule, rule, rule, (a, extra, other) => {
        const stricter = { all: [a, extra] }
        expect(missingConjuncts(a, stricter)).toEqual([])
        expect(implies(meets(joinRules([stricter, other])), meets(joinRules([a, other])))).toBe(true)
      }),
      { numRuns: 150 }
    )
  })

  it("asks for a class as many times as the rule that asks for it most, not the sum", () => {
    expect(joinRules([{ class: "human" }, { all: [{ class: "human" }, { class: "fraud" }] }])).toEqual({ all: [{ class: "fraud" }, { class: "human" }] })
    expect(joinRules([{ class: "human", count: 2 }, { class: "human" }])).toEqual({ class: "human", count: 2 })
    expect(joinRules([{ class: "human", count: 100 }, { all: [{ class: "human", count: 100 }, { class: "human", count: 3 }] }])).toEqual({ all: [{ class: "human", count: 100 }, { class: "human", count: 3 }] })
  })
})

describe("missingConjuncts", () => {
  it("counts places: two humans after three is one human missing", () => {
    expect(missingConjuncts({ class: "human", count: 3 }, { class: "human", count: 2 })).toEqual([canonicalize({ class: "human" })])
    expect(missingConjuncts({ all: [{ class: "human" }, { class: "human" }] }, { class: "human" })).toHaveLength(1)
  })

  it("when nothing is missing, every approval set that meets the later rule meets the earlier", () => {
    fc.assert(
      fc.property(rule, rule, (before, after) => {
        if (missingConjuncts(before, after).length === 0) expect(implies(meets(after), meets(before))).toBe(true)
      }),
      { numRuns: 300 }
    )
  })

  it("a rule's conjuncts are met by the same approvals as the rule", () => {
    fc.assert(fc.property(rule, (r) => {
        expect(meets({ all: [...conjunctsOf(r)] })).toEqual(meets(r))
      }), { numRuns: 150 })
  })
})
