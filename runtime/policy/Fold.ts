// The verdict fold: pure (no I/O, no clock, no hashing), so it can be property-tested.
// The folded state is a join-semilattice (verdict = max, reasons and contracts = sets), so
// `join` is commutative, associative and idempotent and plugin order cannot matter.
import { canonicalize } from "../schema/Canonical.js"
import { joinTerms } from "../schema/EvidenceTerm.js"
import type { Reason, Verdict } from "../schema/Events.js"
import type { WitnessContract, WitnessRule } from "../schema/WitnessContract.js"
import { joinRules } from "../schema/WitnessRule.js"
import type { AdjudicatorVerdict, AdmitVerdict } from "../schema/StageIO.js"

/**
 * What an opinion may do, by where it comes from:
 * - `authority` (the default): an adjudicate-stage plugin of the floor or organization layer, or
 *   the grant itself when those layers pin none. Only these lift the default-deny floor.
 * - `rule`: a built-in rule of the floor or organization layer. It restricts (an ALLOW is no
 *   opinion) and its contract stands in for the default one whenever the call is held, by the
 *   rule or by anything else: the rule says how its tool is witnessed.
 * - `narrowing`: a rule or plugin of a project or user layer. It restricts (an ALLOW is no
 *   opinion) and its contract is added to the others (`joinContracts`), never standing in
 *   for the default one. A narrowing rule's contract, like a `rule`'s, applies whoever holds
 *   the call. So a narrowing layer can only keep or narrow an outcome.
 */
export type Role = "authority" | "rule" | "narrowing"

/** One adjudicator's opinion. An `authority` opinion's `contract` is read only with REQUIRE_WITNESS. */
export interface Opinion {
  readonly by: string
  readonly verdict: AdjudicatorVerdict
  readonly reason?: string
  readonly contract?: WitnessContract
  /** Default `authority`. */
  readonly role?: Role
}

/** A witness-contract provider's offer; `narrowing`: from a project or user layer (added, never standing in). */
export interface Offer {
  readonly contract: WitnessContract
  readonly narrowing?: boolean
}

/** Restrictiveness: DEFER (no opinion) < ALLOW < REQUIRE_WITNESS < DENY. */
export const Rank: Readonly<Record<AdjudicatorVerdict, number>> = { DEFER: 0, ALLOW: 1, REQUIRE_WITNESS: 2, DENY: 3 }

export interface RankedReason extends Reason {
  readonly verdict: AdjudicatorVerdict
}

/**
 * The fold state: the most restrictive verdict seen, the most restrictive among `authority`
 * opinions (DEFER: nothing lifts the floor), every reason, and the contracts that stand in for
 * the default (`contracts`) and those added to it (`added`), as sorted sets.
 */
export interface Folded {
  readonly verdict: AdjudicatorVerdict
  readonly authority: AdjudicatorVerdict
  readonly reasons: ReadonlyArray<RankedReason>
  readonly contracts: ReadonlyArray<WitnessContract>
  readonly added: ReadonlyArray<WitnessContract>
}

/** The identity of `join`: nobody had an opinion. */
export const emptyFold: Folded = { verdict: "DEFER", authority: "DEFER", reasons: [], contracts: [], added: [] }

const key = (v: unknown): string => (v === undefined ? "" : canonicalize(v))

const union = <A>(a: ReadonlyArray<A>, b: ReadonlyArray<A>): ReadonlyArray<A> => {
  const byKey = new Map<string, A>()
  for (const x of a) byKey.set(key(x), x)
  for (const x of b) byKey.set(key(x), x)
  return [...byKey.entries()].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)).map(([, v]) => v)
}

/** The fold state of one opinion. */
export const ofOpinion = (o: Opinion): Folded => {
  const role = o.role ?? "authority"
  const verdict = role !== "authority" && o.verdict === "ALLOW" ? "DEFER" : o.verdict
  const reasons: RankedReason[] = []
  if (o.reason !== undefined && o.reason.length > 0) reasons.push({ by: o.by, reason: o.reason, verdict })
  else if (verdict === "REQUIRE_WITNESS" || verdict === "DENY") reasons.push({ by: o.by, reason: `${verdict} (no reason given)`, verdict })
  const contract = o.contract !== undefined && (verdict === "REQUIRE_WITNESS" || role !== "authority") ? [o.contract] : []
  return {
    verdict,
    authority: role === "authority" ? verdict : "DEFER",
    reasons,
    contracts: role === "narrowing" ? [] : contract,
    added: role === "narrowing" ? contract : []
  }
}

const stricter = (a: AdjudicatorVerdict, b: AdjudicatorVerdict): AdjudicatorVerdict => (Rank[a] >= Rank[b] ? a : b)

/** The join of two fold states. */
export const join = (a: Folded, b: Folded): Folded => ({
  verdict: stricter(a.verdict, b.verdict),
  authority: stricter(a.authority, b.authority),
  reasons: union(a.reasons, b.reasons),
  contracts: union(a.contracts, b.contracts),
  added: union(a.added, b.added)
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

/**
 * The outcome of a fold state. When no `authority` opinion lifted the floor, the floor denies
 * (with the deny reasons if something denied). Reasons are those of the winning verdict. A
 * witness contract is the join of those standing in for the default (or the default when there
 * are none) and every one added by a narrowing layer.
 */
export const decide = (f: Folded, offers: ReadonlyArray<Offer> = []): Decided => {
  const reasonsFor = (v: AdjudicatorVerdict) => f.reasons.filter((r) => r.verdict === v).map(({ by, reason }) => ({ by, reason }))
  if (f.authority === "DEFER" || f.verdict === "DEFER") return { verdict: "DENY", reasons: f.verdict === "DENY" ? reasonsFor("DENY") : [FloorReason] }
  const reasons = reasonsFor(f.verdict)
  if (f.verdict !== "REQUIRE_WITNESS") return { verdict: f.verdict, reasons }
  const named = union(f.contracts, offers.filter((o) => o.narrowing !== true).map((o) => o.contract))
  const added = union(f.added, offers.filter((o) => o.narrowing === true).map((o) => o.contract))
  return { verdict: f.verdict, reasons, contract: joinContracts(union(named.length === 0 ? [DefaultContract] : named, added)) }
}

/**
 * Joins witness contracts: every rule must hold (`joinRules`: each place as many times as the
 * contract that asks for it most), every veto class and evidence term applies. A fallback
 * survives only if all contracts agree on it, or as the earliest `deny` fallback: a `route`
 * fallback could lower the bar, so it never survives a disagreement.
 */
export const joinContracts = (contracts: ReadonlyArray<WitnessContract>): WitnessContract => {
  const set = union(contracts, [])
  if (set.length === 1) return set[0]!
  const veto = [...new Set(set.flatMap((c) => c.veto ?? []))].sort()
  const fallbacks = set.map((c) => c.fallback)
  const agreed = fallbacks.every((f) => f !== undefined && key(f) === key(fallbacks[0]))
  const denies = fallbacks.flatMap((f) => (f !== undefined && f.action === "deny" ? [f.after_ms] : []))
  const fallback = agreed ? fallbacks[0] : denies.length > 0 ? { after_ms: Math.min(...denies), action: "deny" as const } : undefined
  const summaries = [...new Set(set.flatMap((c) => (c.summary === undefined ? [] : [c.summary])))].sort()
  // Every contract's route applies: a witness counts only if each route admits it.
  const routes: ReadonlyArray<WitnessRule> = union(set.flatMap((c) => (c.route === undefined ? [] : [c.route])), [])
  // Every contract's evidence terms apply.
  const evidence = joinTerms(set.map((c) => c.evidence))
  return {
    rule: joinRules(set.map((c) => c.rule)),
    ...(routes.length > 0 ? { route: routes.length === 1 ? routes[0]! : { all: routes } } : {}),
    ...(veto.length > 0 ? { veto } : {}),
    ...(fallback !== undefined ? { fallback } : {}),
    ...(evidence !== undefined ? { evidence } : {}),
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
