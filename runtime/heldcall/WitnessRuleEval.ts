import type { WitnessRule } from "../schema/WitnessContract.js"

/** One approval that counts: who gave it and under which class. */
export interface Approval {
  readonly witness: string
  readonly class: string
}

/** Whether the approvals satisfy the rule. Pure and order-independent. */
export const satisfies = (rule: WitnessRule, approvals: ReadonlyArray<Approval>): boolean => {
  if ("class" in rule) {
    const need = rule.count ?? 1
    const who = new Set(approvals.filter((a) => a.class === rule.class).map((a) => a.witness))
    return who.size >= need
  }
  if ("principal" in rule) return approvals.some((a) => a.witness === rule.principal)
  // A rule that names no witness fails closed.
  if ("all" in rule) return rule.all.length > 0 && rule.all.every((r) => satisfies(r, approvals))
  if ("any" in rule) return rule.any.some((r) => satisfies(r, approvals))
  return rule.quorum.of.filter((r) => satisfies(r, approvals)).length >= rule.quorum.n
}

/** Every class a rule mentions (witnesses of other classes cannot help it). */
export const classesOf = (rule: WitnessRule): ReadonlyArray<string> => {
  if ("class" in rule) return [rule.class]
  if ("principal" in rule) return []
  const parts = "all" in rule ? rule.all : "any" in rule ? rule.any : rule.quorum.of
  return [...new Set(parts.flatMap(classesOf))]
}

/** Every principal a rule names. */
export const principalsOf = (rule: WitnessRule): ReadonlyArray<string> => {
  if ("class" in rule) return []
  if ("principal" in rule) return [rule.principal]
  const parts = "all" in rule ? rule.all : "any" in rule ? rule.any : rule.quorum.of
  return [...new Set(parts.flatMap(principalsOf))]
}
