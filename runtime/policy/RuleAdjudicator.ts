import { Effect, Layer } from "effect"
import { decide, DefaultContract, foldOpinions, type Opinion } from "./Fold.js"
import type { JsonObject } from "../schema/Json.js"
import type { ToolRule } from "../schema/Profile.js"
import { tiersOf, type ActivePolicy } from "./ActivePolicy.js"
import { Adjudicator, type Adjudication, type AdjudicationInput } from "./Adjudicator.js"

/** Used when a witness is required but no rule or plugin names a contract: one human approves. */
export { DefaultContract }

/** The `by` of the grant's opinion: it lifts the floor when no floor or organization plugin adjudicates. */
export const GrantBy = "kernel:grant"

/**
 * One tool rule's opinion on a call: DENY, REQUIRE_WITNESS, or ALLOW (no objection). The rule's
 * contract goes with every opinion: it says how the tool is witnessed whoever holds the call.
 */
export const ruleOpinion = (by: string, rule: ToolRule, args: JsonObject): Omit<Opinion, "role"> => {
  const raw = rule.amount_field === undefined ? undefined : args[rule.amount_field]
  if (rule.amount_field !== undefined && (typeof raw !== "number" || !Number.isFinite(raw) || raw < 0)) {
    return { by, verdict: "DENY", reason: `argument '${rule.amount_field}' must be a non-negative number` }
  }
  const amount = typeof raw === "number" ? raw : 0
  if (rule.deny_above !== undefined && amount > rule.deny_above) return { by, verdict: "DENY", reason: `amount ${amount} is over the hard cap ${rule.deny_above}` }
  if (rule.always_witness === true || (rule.witness_above !== undefined && amount > rule.witness_above)) {
    const reason = rule.always_witness === true ? "tool always needs a witness" : `amount ${amount} is over the witness threshold ${rule.witness_above}`
    return { by, verdict: "REQUIRE_WITNESS", reason, ...(rule.contract !== undefined ? { contract: rule.contract } : {}) }
  }
  return { by, verdict: "ALLOW", ...(rule.contract !== undefined ? { contract: rule.contract } : {}) }
}

/**
 * The kernel's own opinions on a call, which every adjudication folds in whatever plugins are
 * pinned: the floor and organization rule for the tool (role `rule`), the project and user
 * rule (role `narrowing`), and, when no floor or organization profile pins an adjudicate-stage
 * plugin, the grant's ALLOW (the capability floor already checked the grant).
 */
export const builtInOpinions = (policy: ActivePolicy, call: { readonly tool: string; readonly args: JsonObject }): ReadonlyArray<Opinion> => {
  const tiers = tiersOf(policy)
  const out: Array<Opinion> = []
  if (!tiers.authorityAdjudicates) out.push({ by: GrantBy, verdict: "ALLOW" })
  const own = tiers.authorityRules.get(call.tool)
  if (own !== undefined) out.push({ ...ruleOpinion(`rule:${call.tool}`, own, call.args), role: "rule" })
  const narrowing = tiers.narrowingRules.get(call.tool)
  if (narrowing !== undefined) out.push({ ...ruleOpinion(`rule:${call.tool}:narrowing`, narrowing, call.args), role: "narrowing" })
  return out
}

/**
 * The adjudicator of a policy that pins no proposal-stage plugin: the fold of the built-in
 * opinions alone. A granted tool with no rule is allowed.
 */
export const adjudicateByRule = ({ proposal, policy }: AdjudicationInput): Adjudication => {
  const executed = { tool: proposal.tool, args: proposal.args }
  const opinions = builtInOpinions(policy, executed)
  const d = decide(foldOpinions(opinions))
  return {
    verdict: d.verdict,
    reasons: d.reasons,
    ...(d.contract !== undefined ? { contract: d.contract } : {}),
    decisions: opinions.map((o) => ({ by: o.by, output: o.verdict })),
    executed
  }
}

export const layerRuleAdjudicator = Layer.succeed(Adjudicator, { adjudicate: (input) => Effect.succeed(adjudicateByRule(input)) })
