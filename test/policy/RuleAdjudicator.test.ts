import { describe, expect, it } from "vitest"
import { ruleOpinion } from "../../runtime/policy/RuleAdjudicator.js"

// Given a tool rule with an amount field, when a call leaves the field out or sends something else,
// then the rule denies it with the field named: a threshold skipped by omitting its argument would
// bound nothing (profiles/README.md says the field is required).
describe("a rule's amount_field", () => {
  const rule = { amount_field: "amount", witness_above: 1_000 }
  it("is required: a call without it, or with a string, a negative or a non-finite number, is denied naming it", () => {
    for (const args of [{}, { amount: "900" }, { amount: -1 }, { amount: Number.POSITIVE_INFINITY }, { amount: null }])
      expect(ruleOpinion("rule:t", rule, args as never)).toEqual({ by: "rule:t", verdict: "DENY", reason: "argument 'amount' must be a non-negative number" })
  })
  it("reads the thresholds: at or under witness_above no objection, above it a witness", () => {
    expect(ruleOpinion("rule:t", rule, { amount: 1_000 }).verdict).toBe("ALLOW")
    expect(ruleOpinion("rule:t", rule, { amount: 1_001 }).verdict).toBe("REQUIRE_WITNESS")
  })
})
