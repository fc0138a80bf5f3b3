import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { ruleProgress, satisfies, type Approval, type RuleProgress } from "../../runtime/heldcall/WitnessRuleEval.js"
import type { WitnessRule } from "../../runtime/schema/WitnessContract.js"

fc.configureGlobal({ seed: Number(process.env["WK_FC_SEED"] ?? 8785) })

const carol: Approval = { witness: "user:carol", class: "human" }
const dave: Approval = { witness: "user:dave", class: "human" }
const fraud: Approval = { witness: "svc:fraud", class: "fraud" }
const humanAndFraudOrBreakglass: WitnessRule = { any: [{ all: [{ class: "human" }, { class: "fraud" }] }, { class: "breakglass" }] }

describe("ruleProgress: given a rule and the approvals that count, when read for people, then each branch says whether it is met and who fills it", () => {
  it("a person approved, the fraud service not yet: the person's place is met, the conjunction and the rule are not", () => {
    expect(ruleProgress(humanAndFraudOrBreakglass, [carol])).toEqual({
      any: [
        { all: [{ class: "human", count: 1, by: ["user:carol"], met: true }, { class: "fraud", count: 1, by: [], met: false }], met: false },
        { class: "breakglass", count: 1, by: [], met: false }
      ],
      met: false
    })
  })

  it("both approved: the branch and the rule are met", () => {
    const p = ruleProgress(humanAndFraudOrBreakglass, [carol, fraud]) as { any: ReadonlyArray<RuleProgress>; met: boolean }
    expect(p.met).toBe(true)
    expect(p.any[0]!.met).toBe(true)
  })

  it("a count leaf lists distinct principals and is met at the count", () => {
    expect(ruleProgress({ class: "human", count: 2 }, [carol, carol])).toEqual({ class: "human", count: 2, by: ["user:carol"], met: false })
    expect(ruleProgress({ class: "human", count: 2 }, [dave, carol])).toEqual({ class: "human", count: 2, by: ["user:carol", "user:dave"], met: true })
  })

  it("a named principal is met by that principal only", () => {
    expect(ruleProgress({ principal: "svc:fraud" }, [carol])).toEqual({ principal: "svc:fraud", met: false })
    expect(ruleProgress({ quorum: { n: 1, of: [{ principal: "svc:fraud" }] } }, [fraud])).toEqual({ quorum: { n: 1, of: [{ principal: "svc:fraud", met: true }] }, met: true })
  })
})

describe("ruleProgress: properties", () => {
  const approvalArb = fc.record({ witness: fc.constantFrom("user:carol", "user:dave", "svc:fraud", "compliance:zoe"), class: fc.constantFrom("human", "fraud", "compliance") })
  const ruleArb: fc.Arbitrary<WitnessRule> = fc.letrec<{ rule: WitnessRule }>((tie) => ({
    rule: fc.oneof(
      { depthSize: "small", withCrossShrink: true },
      fc.record({ class: fc.constantFrom("human", "fraud", "compliance"), count: fc.integer({ min: 1, max: 2 }) }),
      fc.constantFrom("user:carol", "svc:fraud").map((principal) => ({ principal })),
      fc.array(tie("rule"), { minLength: 1, maxLength: 3 }).map((all) => ({ all })),
      fc.array(tie("rule"), { minLength: 1, maxLength: 3 }).map((any) => ({ any })),
      fc.array(tie("rule"), { minLength: 1, maxLength: 3 }).chain((of) => fc.integer({ min: 1, max: of.length }).map((n) => ({ quorum: { n, of } })))
    )
  })).rule

  /** Every node of a progress tree beside the rule part it reports on. */
  const pairs = (rule: WitnessRule, p: RuleProgress): Array<[WitnessRule, RuleProgress]> => {
    const kids = (rs: ReadonlyArray<WitnessRule>, ps: ReadonlyArray<RuleProgress>) => rs.flatMap((r, i) => pairs(r, ps[i]!))
    if ("all" in rule && "all" in p) return [[rule, p], ...kids(rule.all, p.all)]
    if ("any" in rule && "any" in p) return [[rule, p], ...kids(rule.any, p.any)]
    if ("quorum" in rule && "quorum" in p) return [[rule, p], ...kids(rule.quorum.of, p.quorum.of)]
    return [[rule, p]]
  }

  it("the tree has the rule's shape and every node's met is that part's satisfies (the root's is the kernel's verdict)", () => {
    fc.assert(
      fc.property(ruleArb, fc.array(approvalArb, { maxLength: 5 }), (rule, approvals) => {
        const p = ruleProgress(rule, approvals)
        expect(p.met).toBe(satisfies(rule, approvals))
        for (const [r, n] of pairs(rule, p)) expect(n.met).toBe(satisfies(r, approvals))
      })
    )
  })

  it("a class leaf names exactly the distinct principals that approved under its class", () => {
    fc.assert(
      fc.property(fc.array(approvalArb, { maxLength: 6 }), fc.constantFrom("human", "fraud", "compliance"), (approvals, klass) => {
        const p = ruleProgress({ class: klass }, approvals) as { by: ReadonlyArray<string> }
        expect(new Set(p.by)).toEqual(new Set(approvals.filter((a) => a.class === klass).map((a) => a.witness)))
        expect(p.by.length).toBe(new Set(p.by).size)
      })
    )
  })
})
