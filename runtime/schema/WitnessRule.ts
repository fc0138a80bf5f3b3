import { Schema } from "effect"
import { canonicalize } from "./Canonical.js"

/**
 * A witness rule, as data. Leaves name a witness class (with an optional count of distinct
 * principals) or one named principal; inner nodes combine with all / any / quorum(n).
 */
export type WitnessRule =
  | { readonly class: string; readonly count?: number }
  | { readonly principal: string }
  | { readonly all: ReadonlyArray<WitnessRule> }
  | { readonly any: ReadonlyArray<WitnessRule> }
  | { readonly quorum: { readonly n: number; readonly of: ReadonlyArray<WitnessRule> } }

const Count = Schema.Int.pipe(Schema.between(1, 100))

export const WitnessRule: Schema.Schema<WitnessRule> = Schema.Union(
  Schema.Struct({ class: Schema.String.pipe(Schema.minLength(1)), count: Schema.optional(Count) }),
  Schema.Struct({ principal: Schema.String.pipe(Schema.minLength(1)) }),
  Schema.Struct({ all: Schema.Array(Schema.suspend(() => WitnessRule)).pipe(Schema.minItems(1)) }),
  Schema.Struct({ any: Schema.Array(Schema.suspend(() => WitnessRule)).pipe(Schema.minItems(1)) }),
  Schema.Struct({ quorum: Schema.Struct({ n: Count, of: Schema.Array(Schema.suspend(() => WitnessRule)).pipe(Schema.minItems(1)) }) })
)


/**
 * The places a rule asks for side by side, as conjuncts: `all` flattened and a class with a count
 * of n as n single class places. `all` needs distinct principals across its parts, so a rule and
 * its conjuncts under one `all` are met by the same approvals.
 */
export const conjunctsOf = (rule: WitnessRule): ReadonlyArray<WitnessRule> => {
  if ("all" in rule) return rule.all.flatMap(conjunctsOf)
  if ("class" in rule) return Array.from({ length: rule.count ?? 1 }, () => ({ class: rule.class }))
  return [rule]
}

/** How many times each conjunct (by canonical JSON) appears in the rule. */
const tally = (rule: WitnessRule): Map<string, number> => {
  const out = new Map<string, number>()
  for (const c of conjunctsOf(rule)) {
    const k = canonicalize(c)
    out.set(k, (out.get(k) ?? 0) + 1)
  }
  return out
}

/**
 * The conjuncts of `before` that `after` no longer asks for, counted: `{class: "human", count: 2}`
 * after `{class: "human", count: 3}` is missing one human place. Empty: `after` asks for every
 * place `before` does, so every approval set that meets `after` meets `before`.
 */
export const missingConjuncts = (before: WitnessRule, after: WitnessRule): ReadonlyArray<string> => {
  const has = tally(after)
  return [...tally(before)].flatMap(([k, n]) => Array.from({ length: Math.max(0, n - (has.get(k) ?? 0)) }, () => k))
}

/**
 * Several rules that must all hold, as one rule: each conjunct as many times as the rule that asks
 * for it most. This is a join (commutative, associative, idempotent), it asks for every place each
 * rule asks for, and making one rule stricter never makes the join looser: a rule made equal to
 * another is not absorbed into it at the price of a place.
 */
export const joinRules = (rules: ReadonlyArray<WitnessRule>): WitnessRule => {
  const most = new Map<string, number>()
  for (const r of rules) for (const [k, n] of tally(r)) most.set(k, Math.max(n, most.get(k) ?? 0))
  const parts = [...most].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)).flatMap(([k, n]): ReadonlyArray<WitnessRule> => {
    const c = JSON.parse(k) as WitnessRule
    // A count is at most 100 (the schema's bound): more places of one class are several leaves.
    if ("class" in c) return Array.from({ length: Math.ceil(n / 100) }, (_, i) => Math.min(100, n - i * 100)).map((m) => (m === 1 ? c : { class: c.class, count: m }))
    return Array.from({ length: n }, () => c)
  })
  return parts.length === 1 ? parts[0]! : { all: parts }
}
