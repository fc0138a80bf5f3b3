import type { WitnessRule } from "../schema/WitnessContract.js"

/** One approval that counts: who gave it and under which class. */
export interface Approval {
  readonly witness: string
  readonly class: string
}

/**
 * Whether the approvals satisfy the rule, each principal counting once across the whole rule:
 * `all` and `quorum` need their parts met by distinct principals, and a `count` of a class needs
 * that many distinct principals. A principal approving under several classes is still one
 * principal; it fills one place of the rule. Pure and order-independent.
 *
 * The rule is read as every way it can be met (an `any` picks one part, a `quorum` n parts, an
 * `all` every part), each a list of places (a class place accepts a principal that approved
 * under that class, a principal place that principal); a way is met when distinct principals
 * fill all its places (a bipartite matching).
 */
export const satisfies = (rule: WitnessRule, approvals: ReadonlyArray<Approval>): boolean => {
  const classesBy = new Map<string, Set<string>>()
  for (const a of approvals) {
    const set = classesBy.get(a.witness) ?? new Set<string>()
    set.add(a.class)
    classesBy.set(a.witness, set)
  }
  const principals = [...classesBy.keys()].sort()
  return waysOf(rule).some((places) => fillable(places, principals, classesBy))
}

/** What a rule can still become, given the principals who approved and those who still might. */
export type RuleStatus = "satisfied" | "pending" | "unsatisfiable"

/**
 * Three-valued evaluation. `possible` are the approvals that could still arrive (every
 * registered principal under each of its classes, less those whose reject is final and the
 * proposer); `approvals` those that count now. Satisfied by the approvals; otherwise pending
 * while the approvals together with the possible ones could satisfy it; otherwise unsatisfiable.
 */
export const ruleStatus = (rule: WitnessRule, approvals: ReadonlyArray<Approval>, possible: ReadonlyArray<Approval>): RuleStatus =>
  satisfies(rule, approvals) ? "satisfied" : satisfies(rule, [...approvals, ...possible]) ? "pending" : "unsatisfiable"

/** One place a principal must fill: any principal that approved under a class, or one named principal. */
type Place = { readonly class: string } | { readonly principal: string }

/** Every way to meet a rule, as the places it needs. An empty `all`/`any`, or n over the parts, has none (fails closed). */
const waysOf = (rule: WitnessRule): ReadonlyArray<ReadonlyArray<Place>> => {
  if ("class" in rule) return [Array.from({ length: rule.count ?? 1 }, () => ({ class: rule.class }))]
  if ("principal" in rule) return [[{ principal: rule.principal }]]
  if ("all" in rule) return rule.all.length === 0 ? [] : every(rule.all)
  if ("any" in rule) return rule.any.flatMap(waysOf)
  return choose(rule.quorum.of, rule.quorum.n).flatMap(every)
}

/** The ways to meet every one of the parts: one way of each, together. */
const every = (parts: ReadonlyArray<WitnessRule>): ReadonlyArray<ReadonlyArray<Place>> =>
  parts.reduce<ReadonlyArray<ReadonlyArray<Place>>>((ways, part) => ways.flatMap((w) => waysOf(part).map((p) => [...w, ...p])), [[]])

/** Every n-element subset of xs, in order. */
const choose = <T>(xs: ReadonlyArray<T>, n: number): ReadonlyArray<ReadonlyArray<T>> => {
  if (n === 0) return [[]]
  if (xs.length < n) return []
  const [head, ...rest] = xs as [T, ...Array<T>]
  return [...choose(rest, n - 1).map((c) => [head, ...c]), ...choose(rest, n)]
}

/** Whether distinct principals can fill every place (Kuhn's augmenting paths). */
const fillable = (places: ReadonlyArray<Place>, principals: ReadonlyArray<string>, classesBy: ReadonlyMap<string, ReadonlySet<string>>): boolean => {
  if (places.length > principals.length) return false
  const fits = (place: Place, p: string): boolean => ("principal" in place ? place.principal === p : classesBy.get(p)?.has(place.class) === true)
  const holder = new Map<string, number>()
  const assign = (i: number, tried: Set<string>): boolean => {
    for (const p of principals) {
      if (tried.has(p) || !fits(places[i]!, p)) continue
      tried.add(p)
      const other = holder.get(p)
      if (other === undefined || assign(other, tried)) {
        holder.set(p, i)
        return true
      }
    }
    return false
  }
  return places.every((_, i) => assign(i, new Set()))
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

/**
 * How far the approvals that count are along each branch of a rule, for people reading it:
 * every node says whether it is met on its own (`satisfies` of that part) and a leaf names who
 * fills it. The root's `met` is the rule's; a part met on its own may still need principals a
 * sibling uses (each principal counts once across the rule).
 */
export type RuleProgress =
  | { readonly class: string; readonly count: number; readonly by: ReadonlyArray<string>; readonly met: boolean }
  | { readonly principal: string; readonly met: boolean }
  | { readonly all: ReadonlyArray<RuleProgress>; readonly met: boolean }
  | { readonly any: ReadonlyArray<RuleProgress>; readonly met: boolean }
  | { readonly quorum: { readonly n: number; readonly of: ReadonlyArray<RuleProgress> }; readonly met: boolean }

export const ruleProgress = (rule: WitnessRule, approvals: ReadonlyArray<Approval>): RuleProgress => {
  const met = satisfies(rule, approvals)
  if ("class" in rule) {
    const by = [...new Set(approvals.filter((a) => a.class === rule.class).map((a) => a.witness))].sort()
    return { class: rule.class, count: rule.count ?? 1, by, met }
  }
  if ("principal" in rule) return { principal: rule.principal, met }
  if ("all" in rule) return { all: rule.all.map((r) => ruleProgress(r, approvals)), met }
  if ("any" in rule) return { any: rule.any.map((r) => ruleProgress(r, approvals)), met }
  return { quorum: { n: rule.quorum.n, of: rule.quorum.of.map((r) => ruleProgress(r, approvals)) }, met }
}
