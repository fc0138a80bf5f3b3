// The spend-limit plugin reproduces the spine's rule adjudicator (RuleAdjudicator.ts).
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import { Adjudicator } from "../../runtime/policy/Adjudicator.js"
import { adjudicateByRule } from "../../runtime/policy/RuleAdjudicator.js"
import type { ToolRule } from "../../runtime/schema/Profile.js"
import type { JsonObject } from "../../runtime/schema/Json.js"
import { Now, pinOf, pipelineLayer, policyWith, proposal } from "./support.js"

const ruleArb: fc.Arbitrary<ToolRule> = fc.record(
  {
    amount_field: fc.constant("amount"),
    witness_above: fc.integer({ min: 0, max: 1000 }),
    deny_above: fc.integer({ min: 0, max: 5000 }),
    always_witness: fc.boolean(),
    contract: fc.constantFrom({ rule: { class: "finance" } }, { rule: { class: "human", count: 2 }, summary: "two humans" })
  },
  { requiredKeys: [] }
)

const amountArb: fc.Arbitrary<JsonObject[string] | undefined> = fc.oneof(
  fc.integer({ min: 0, max: 6000 }),
  fc.integer({ min: 0, max: 600_000 }).map((c) => c / 100),
  fc.constantFrom(-1, "100", null, undefined, true, 0)
)

describe("spend-limit plugin", () => {
  it.scoped("gives the rule adjudicator's verdict, reasons and contract", () =>
    Effect.gen(function* () {
      const adj = yield* Adjudicator
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(ruleArb, amountArb, fc.boolean(), async (rule, amount, ruled) => {
            const tool = ruled ? "payments.transfer" : "notes.read"
            const args: JsonObject = amount === undefined ? { to: "bob" } : { to: "bob", amount }
            const rules = { "payments.transfer": rule }
            const pin = pinOf("spend-limit", { config: { rules } as JsonObject })
            const plugin = await Effect.runPromise(adj.adjudicate({ proposal: proposal(tool, args), policy: policyWith([pin]), now: Now }))
            const spine = adjudicateByRule({ proposal: proposal(tool, args), policy: policyWith([], undefined, { rules }), now: Now })
            expect(plugin.verdict).toBe(spine.verdict)
            expect(plugin.reasons.map((r) => r.reason)).toEqual(spine.reasons.map((r) => r.reason))
            expect(plugin.contract).toEqual(spine.contract)
          }),
          { numRuns: 150 }
        )
      )
    }).pipe(Effect.provide(pipelineLayer()))
  )
})
