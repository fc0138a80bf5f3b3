import { Schema } from "effect"
import { EvidenceTerm, joinTerms } from "./EvidenceTerm.js"
import { joinRules, WitnessRule } from "./WitnessRule.js"

export { WitnessRule } from "./WitnessRule.js"

/** What happens when no satisfying evidence arrives in time. */
export const Fallback = Schema.Union(
  Schema.Struct({ after_ms: Schema.Int.pipe(Schema.positive()), action: Schema.Literal("deny") }),
  Schema.Struct({ after_ms: Schema.Int.pipe(Schema.positive()), action: Schema.Literal("route"), rule: WitnessRule })
)
export type Fallback = typeof Fallback.Type

/** The condition a held call waits on. Its JCS sha256 is the `contract_digest`. */
export const WitnessContract = Schema.Struct({
  rule: WitnessRule,
  /**
   * Who may witness, from a `witness_route` preference: only approvals from witnesses the route
   * admits (`routeAdmits`) count toward `rule`. A route picks among the witnesses the rule admits;
   * it never replaces the rule, so it only narrows. Vetoes are not routed.
   */
  route: Schema.optional(WitnessRule),
  /** One `reject` from a principal of a veto class ends the call (denied). */
  veto: Schema.optional(Schema.Array(Schema.String)),
  fallback: Schema.optional(Fallback),
  /** Evidence the call needs besides the rule's approvals: each term met by an `evidence` attestation from a witness its `by` admits (EvidenceTerm.ts). */
  evidence: Schema.optional(Schema.Array(EvidenceTerm)),
  /** Human-readable summary shown to witnesses. */
  summary: Schema.optional(Schema.String)
})
export type WitnessContract = typeof WitnessContract.Type

/**
 * Whether a route admits a witness: a `principal` leaf by name, a `class` leaf when the witness
 * is registered with that class (its `count` is not used: the contract's rule says how many);
 * `all` when every part admits it, `any` when one does, `quorum` when at least `n` do.
 */
export const routeAdmits = (route: WitnessRule, witness: string, classes: ReadonlyArray<string>): boolean => {
  if ("principal" in route) return route.principal === witness
  if ("class" in route) return classes.includes(route.class)
  if ("all" in route) return route.all.every((r) => routeAdmits(r, witness, classes))
  if ("any" in route) return route.any.some((r) => routeAdmits(r, witness, classes))
  return route.quorum.of.filter((r) => routeAdmits(r, witness, classes)).length >= route.quorum.n
}

/**
 * Two contracts that must both hold, as one: both rules (`joinRules`), both sets of vetoes and
 * evidence terms. Every approval set that meets the join meets each part.
 */
export const joinContracts = (a: WitnessContract, b: WitnessContract): WitnessContract => {
  const evidence = joinTerms([a.evidence, b.evidence])
  const veto = [...new Set([...(a.veto ?? []), ...(b.veto ?? [])])]
  return { rule: joinRules([a.rule, b.rule]), ...(veto.length > 0 ? { veto } : {}), ...(evidence !== undefined ? { evidence } : {}), ...(a.summary ?? b.summary ? { summary: (a.summary ?? b.summary)! } : {}) }
}
