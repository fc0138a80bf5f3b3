// The verdict fold: pure (no I/O, no clock, no hashing), so it can be property-tested.
// The folded state is a join-semilattice (verdict = max, reasons and contracts = sets), so
// `join` is commutative, associative and idempotent and plugin order cannot matter.
import canonicalizeJson from "canonicalize"
import type { Reason, Verdict } from "../schema/Events.js"
import type { WitnessContract, WitnessRule } from "../schema/WitnessContract.js"
import type { AdjudicatorVerdict, AdmitVerdict } from "./StageIO.js"

/** One adjudicator's opinion. `contract` is read only with REQUIRE_WITNESS. */
export interface Opinion {
  readonly by: string
  readonly verdict: AdjudicatorVerdict
  readonly reason?: string
  readonly contract?: WitnessContract
}

/** Restrictiveness: DEFER (no opinion) < ALLOW < REQUIRE_WITNESS < DENY. */
export const Rank: Readonly<Record<AdjudicatorVerdict, number>> = { DEFER: 0, ALLOW: 1, REQUIRE_WITNESS: 2, DENY: 3 }

export interface RankedReason extends Reason {
  readonly verdict: AdjudicatorVerdict
}

/** The fold state: the most restrictive verdict seen, and every reason and contract, as sorted sets. */
export interface Folded {
  readonly verdict: AdjudicatorVerdict
  readonly reasons: ReadonlyArray<RankedReason>
  readonly contracts: ReadonlyArray<WitnessContract>
}

/** The identity of `join`: nobody had an opinion. */
export const emptyFold: Folded = { verdict: "DEFER", reasons: [], contracts: [] }

const key = (v: unknown): string => canonicalizeJson(v) ?? ""

const union = <A>(a: ReadonlyArray<A>, b: ReadonlyArray<A>): ReadonlyArray<A> => {
  const byKey = new Map<string, A>()
  for (const x of a) byKey.set(key(x), x)
  for (const x of b) byKey.set(key(x), x)
  return [...byKey.entries()].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)).map(([, v]) => v)
}

/** The fold state of one opinion. */
export const ofOpinion = (o: Opinion): Folded => {
  const reasons: RankedReason[] = []
  if (o.reason !== undefined && o.reason.length > 0) reasons.push({ by: o.by, reason: o.reason, verdict: o.verdict })
  else if (o.verdict === "REQUIRE_WITNESS" || o.verdict === "DENY") reasons.push({ by: o.by, reason: `${o.verdict} (no reason given)`, verdict: o.verdict })
  return { verdict: o.verdict, reasons, contracts: o.verdict === "REQUIRE_WITNESS" && o.contract !== undefined ? [o.contract] : [] }
}

/** The join of two fold states. */
export const join = (a: Folded, b: Folded): Folded => ({
  verdict: Rank[a.verdict] >= Rank[b.verdict] ? a.verdict : b.verdict,
  reasons: union(a.reasons, b.reasons),
  contracts: union(a.contracts, b.contracts)
})

export const foldOpinions = (opinions: ReadonlyArray<Opinion>): Folded => opinions.map(ofOpinion).reduce(join, emptyFold)

/** Said when every adjudicator deferred: the kernel's floor is default deny. */
export const FloorReason: Reason = { by: "floor", reason: "no adjudicator gave an opinion; the floor denies by default" }

/** Used when a witness is required but nobody named a contract: one human approves. */
export const DefaultContract: WitnessContract = { rule: { class: "human" }, summary: "one human approval" }

export interface Decided {
  readonly verdict: Verdict
  readonly reasons: ReadonlyArray<Reason>
  readonly contract?: WitnessContract
}

/** The outcome of a fold state: DEFER goes to the floor (deny); reasons are those of the winning verdict. */
export const decide = (f: Folded, extraContracts: ReadonlyArray<WitnessContract> = []): Decided => {
  if (f.verdict === "DEFER") return { verdict: "DENY", reasons: [FloorReason] }
  const reasons = f.reasons.filter((r) => r.verdict === f.verdict).map(({ by, reason }) => ({ by, reason }))
  if (f.verdict !== "REQUIRE_WITNESS") return { verdict: f.verdict, reasons }
  const contracts = union(f.contracts, extraContracts)
  return { verdict: f.verdict, reasons, contract: contracts.length === 0 ? DefaultContract : joinContracts(contracts) }
}

/**
 * Joins witness contracts with `all`: every rule must hold, every veto class applies. A fallback
 * survives only if all contracts agree on it, or as the earliest `deny` fallback: a `route`
 * fallback could lower the bar, so it never survives a disagreement.
 */
export const joinContracts = (contracts: ReadonlyArray<WitnessContract>): WitnessContract => {
  const set = union(contracts, [])
  if (set.length === 1) return set[0]!
  const rules: ReadonlyArray<WitnessRule> = union(set.map((c) => c.rule), [])
  const veto = [...new Set(set.flatMap((c) => c.veto ?? []))].sort()
  const fallbacks = set.map((c) => c.fallback)
  const agreed = fallbacks.every((f) => f !== undefined && key(f) === key(fallbacks[0]))
  const denies = fallbacks.flatMap((f) => (f !== undefined && f.action === "deny" ? [f.after_ms] : []))
  const fallback = agreed ? fallbacks[0] : denies.length > 0 ? { after_ms: Math.min(...denies), action: "deny" as const } : undefined
  const summaries = [...new Set(set.flatMap((c) => (c.summary === undefined ? [] : [c.summary])))].sort()
  // Every contract's route applies: a witness counts only if each route admits it.
  const routes: ReadonlyArray<WitnessRule> = union(set.flatMap((c) => (c.route === undefined ? [] : [c.route])), [])
  return {
    rule: rules.length === 1 ? rules[0]! : { all: rules },
    ...(routes.length > 0 ? { route: routes.length === 1 ? routes[0]! : { all: routes } } : {}),
    ...(veto.length > 0 ? { veto } : {}),
    ...(fallback !== undefined ? { fallback } : {}),
    ...(summaries.length > 0 ? { summary: summaries.join("; ") } : {})
  }
}

/** One result-admission opinion. */
export interface AdmitOpinion {
  readonly by: string
  readonly verdict: AdmitVerdict
  readonly reason?: string
}

export type AdmissionDecided = { readonly admitted: true } | { readonly admitted: false; readonly by: string; readonly reason: string }

/** Any QUARANTINE wins; otherwise admitted (the call was authorized, its result is admitted by default). */
export const foldAdmission = (opinions: ReadonlyArray<AdmitOpinion>): AdmissionDecided => {
  const q = union(
    opinions.filter((o) => o.verdict === "QUARANTINE").map((o) => ({ by: o.by, reason: o.reason ?? "quarantined (no reason given)" })),
    []
  )
  if (q.length === 0) return { admitted: true }
  return { admitted: false, by: [...new Set(q.map((x) => x.by))].join(","), reason: q.map((x) => `${x.by}: ${x.reason}`).join("; ") }
}
