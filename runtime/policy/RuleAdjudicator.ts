import { Effect, Layer } from "effect"
import type { WitnessContract } from "../schema/WitnessContract.js"
import { Adjudicator, type Adjudication, type AdjudicationInput } from "./Adjudicator.js"

/** Used when a tool's rule asks for a witness but names no contract: one human approves. */
export const DefaultContract: WitnessContract = { rule: { class: "human" }, summary: "one human approval" }

/**
 * The spine's adjudicator: amount thresholds per tool from the profile. A tool with no rule
 * is allowed (the grant floor already applied). Issue 4 moves this into a WASM plugin.
 */
export const adjudicateByRule = ({ proposal, policy }: AdjudicationInput): Adjudication => {
  const executed = { tool: proposal.tool, args: proposal.args }
  const rule = policy.rules.get(proposal.tool)
  const by = "rule:" + proposal.tool
  if (rule === undefined) return { verdict: "ALLOW", reasons: [], decisions: [{ by, output: "ALLOW" }], executed }
  const raw = rule.amount_field === undefined ? undefined : proposal.args[rule.amount_field]
  if (rule.amount_field !== undefined && (typeof raw !== "number" || !Number.isFinite(raw) || raw < 0)) {
    return deny(by, `argument '${rule.amount_field}' must be a non-negative number`, executed)
  }
  const amount = typeof raw === "number" ? raw : 0
  if (rule.deny_above !== undefined && amount > rule.deny_above) return deny(by, `amount ${amount} is over the hard cap ${rule.deny_above}`, executed)
  if (rule.always_witness === true || (rule.witness_above !== undefined && amount > rule.witness_above)) {
    const why = rule.always_witness === true ? "tool always needs a witness" : `amount ${amount} is over the witness threshold ${rule.witness_above}`
    return { verdict: "REQUIRE_WITNESS", reasons: [{ by, reason: why }], contract: rule.contract ?? DefaultContract, decisions: [{ by, output: "REQUIRE_WITNESS" }], executed }
  }
  return { verdict: "ALLOW", reasons: [], decisions: [{ by, output: "ALLOW" }], executed }
}

const deny = (by: string, reason: string, executed: Adjudication["executed"]): Adjudication => ({
  verdict: "DENY",
  reasons: [{ by, reason }],
  decisions: [{ by, output: "DENY" }],
  executed
})

export const layerRuleAdjudicator = Layer.succeed(Adjudicator, { adjudicate: (input) => Effect.succeed(adjudicateByRule(input)) })
