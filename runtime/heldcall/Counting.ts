import type { Evidence, HeldCallFacts } from "../schema/Facts.js"
import type { Reason } from "../schema/Events.js"
import { routeAdmits, type WitnessRule } from "../schema/WitnessContract.js"
import { presentationDigest } from "../schema/Canonical.js"
import { canonicalCall, currentEvidence, editorsOf } from "./Facts.js"
import { meetsTerm, type EvidenceTerm } from "../schema/EvidenceTerm.js"
import { dependencyRejects } from "./Dependencies.js"
import { ruleStatus, type Approval, type RuleStatus } from "./WitnessRuleEval.js"

/**
 * The last answer per facts object and the context it was computed under. Facts are immutable
 * values and a context does not change, so an answer for the same pair is the same answer: one
 * reconcile asks for a call's outlook and refusals several times (derivations, actions, the
 * dispatch check), and each is computed once. Weakly held: nothing outlives its facts.
 */
interface Memo<C, A> {
  readonly ctx: C
  readonly answer: A
}
const remembered = <C, A>(memo: WeakMap<HeldCallFacts, Memo<C, A>>, f: HeldCallFacts, ctx: C, compute: (f: HeldCallFacts, ctx: C) => A): A => {
  const hit = memo.get(f)
  if (hit !== undefined && hit.ctx === ctx) return hit.answer
  const answer = compute(f, ctx)
  memo.set(f, { ctx, answer })
  return answer
}
const refusalsMemo = new WeakMap<HeldCallFacts, Memo<WitnessRegistry, ReadonlyArray<Refusal>>>()
const outlookMemo = new WeakMap<HeldCallFacts, Memo<CountingContext, Outlook>>()

/**
 * Which evidence counts, decided again at every readiness check against the registry in force
 * (design invariants 3 and 4): a statement counts only while its witness still holds its class
 * and its signing key is still registered, and each principal counts once. Pure.
 */

/** The witness registry in force, as the evidence checks read it. */
export interface WitnessRegistry {
  /** Classes a principal is registered with under the policy in force. */
  readonly classesOf: (principal: string) => ReadonlyArray<string>
  /** Public keys registered to a principal under the policy in force. */
  readonly keysOf: (principal: string) => ReadonlyArray<string>
  /** Every registered principal: who could still attest. */
  readonly principals: () => ReadonlyArray<string>
  /** The session namespace a principal acts in (`alice` for `alice.*` sessions), when the registry names one. */
  readonly namespaceOf?: (principal: string) => string | undefined
}

/**
 * Whether a witness acts for the proposer of a call through a session namespace: the witness
 * is registered in the namespace of the call's session (`alice` for `alice.s1`) or in the
 * proposer's own. A peer reviewer that is another principal with another key is still not
 * independent when it runs in the proposer's namespace. Undefined when independent.
 */
export const sharedNamespace = (registry: WitnessRegistry, witness: string, proposer: string, sessionId: string): string | undefined => {
  const ns = registry.namespaceOf?.(witness)
  if (ns === undefined) return undefined
  const session = sessionId.includes(".") ? sessionId.slice(0, sessionId.indexOf(".")) : undefined
  return ns === session || ns === registry.namespaceOf?.(proposer) ? ns : undefined
}

/** The registry and the time the evidence is judged at. */
export interface CountingContext extends WitnessRegistry {
  readonly now: number
}

/** A witness's final no for the current generation: its reject, its revoke, or its failed nested call. */
export interface Refusal {
  readonly witness: string
  readonly kind: "reject" | "revoke" | "dependency"
  /** The class it attested under (absent for a failed nested call). */
  readonly class?: string
  readonly reason: string
  /** The witness's own reason with its reject or revoke, when it gave one. */
  readonly statement?: string
}

/** The digest of the presentation the current witness request shows (as `call.held` recorded it, or computed for older logs), or null while none was shown. */
export const currentPresentationDigest = (f: HeldCallFacts): string | null =>
  f.witness_request === null ? null : (f.witness_request.presentation_digest ?? presentationDigest(f.witness_request.presentation))

/** Whether the registry in force still stands behind a statement: class held, signing key registered. */
export const stillRegistered = (e: Evidence, registry: WitnessRegistry): boolean =>
  registry.classesOf(e.witness).includes(e.class) && registry.keysOf(e.witness).includes(e.key)

/** Whether a witness is independent of the call's proposer under the registry in force: another principal, not acting in its session namespace. */
const independent = (f: HeldCallFacts, registry: WitnessRegistry, witness: string): boolean =>
  f.spec === null || proposersOf(f).every((p) => witness !== p && (registry.namespaceOf === undefined || sharedNamespace(registry, witness, p, f.spec!.session_id) === undefined))

/** Who proposed the current generation: the agent, and every witness whose edit made a generation. */
export const proposersOf = (f: HeldCallFacts): ReadonlyArray<string> => (f.spec === null ? [] : [f.spec.principal, ...editorsOf(f.spec)])

/**
 * Statements of the current generation the registry stands behind, from witnesses independent of
 * the proposer (a witness the registry now places in the proposer's session namespace stops
 * counting, as one whose key is removed does), bound to what is shown now.
 */
const standing = (f: HeldCallFacts, registry: WitnessRegistry): ReadonlyArray<Evidence> => {
  let shown: string | null | undefined
  const isShown = (digest: string) => digest === (shown === undefined ? (shown = currentPresentationDigest(f)) : shown)
  return currentEvidence(f).filter(
    (e) => independent(f, registry, e.witness) && stillRegistered(e, registry) && (e.presentation_digest === undefined || isShown(e.presentation_digest))
  )
}

/**
 * Every witness whose no is final for the current generation, sorted by witness: a reject (no
 * revoke withdraws it, whatever its expiry), a revoke (it withdraws that witness's approvals of the
 * generation for good), and a failed nested call the witness attached.
 */
export const refusalsOf = (f: HeldCallFacts, registry: WitnessRegistry): ReadonlyArray<Refusal> => remembered(refusalsMemo, f, registry, refusalsNow)

const refusalsNow = (f: HeldCallFacts, registry: WitnessRegistry): ReadonlyArray<Refusal> => {
  const out = new Map<string, Refusal>()
  const statements = standing(f, registry).filter((e) => e.status === "valid")
  // A reject is named before a revoke of the same witness: it is the stronger no.
  for (const kind of ["reject", "revoke"] as const) {
    for (const e of statements) {
      if (e.decision !== kind || out.has(e.witness)) continue
      const what = kind === "reject" ? "reject by" : "approval revoked by"
      out.set(e.witness, { witness: e.witness, kind, class: e.class, reason: `${what} ${e.class} witness ${e.witness}${e.reason ? `: ${e.reason}` : ""}`, ...(e.reason ? { statement: e.reason } : {}) })
    }
  }
  for (const d of dependencyRejects(f)) if (!out.has(d.witness)) out.set(d.witness, { ...d, kind: "dependency" })
  return [...out.values()].sort((a, b) => (a.witness < b.witness ? -1 : a.witness > b.witness ? 1 : 0))
}

/**
 * The kind of final no a witness gave the current generation, as recorded (the kernel refuses
 * its later approvals at once rather than accept them and never count them).
 */
export const finalNoOf = (f: HeldCallFacts, witness: string): Refusal["kind"] | undefined => {
  const mine = currentEvidence(f).filter((e) => e.witness === witness && e.status === "valid")
  if (mine.some((e) => e.decision === "reject")) return "reject"
  if (mine.some((e) => e.decision === "revoke")) return "revoke"
  return dependencyRejects(f).some((d) => d.witness === witness) ? "dependency" : undefined
}

/** Whether the contract's route (a `witness_route` preference) lets a witness's approvals count; no route lets every one. */
const onRoute = (f: HeldCallFacts, registry: WitnessRegistry, witness: string): boolean => {
  const route = f.witness_contract?.route
  return route === undefined || routeAdmits(route, witness, registry.classesOf(witness))
}

/** Approvals that count now: standing, unexpired, on the contract's route, and from a witness with no final no. */
export const countingApprovals = (f: HeldCallFacts, ctx: CountingContext): ReadonlyArray<Evidence> => {
  const refused = new Set(refusalsOf(f, ctx).map((r) => r.witness))
  return standing(f, ctx).filter(
    (e) => e.status === "valid" && e.decision === "approve" && Date.parse(e.expires_at) > ctx.now && !refused.has(e.witness) && onRoute(f, ctx, e.witness)
  )
}

/** The veto in force, if any: a final no from a witness of a veto class (by its reject's class, or any class it holds for a failed nested call). */
export const vetoOf = (f: HeldCallFacts, registry: WitnessRegistry): Refusal | undefined => {
  const veto = f.witness_contract?.veto ?? []
  return refusalsOf(f, registry).find((r) =>
    r.kind === "reject" ? veto.includes(r.class!) : r.kind === "dependency" && registry.classesOf(r.witness).some((c) => veto.includes(c))
  )
}

/** Approvals that could still arrive: each registered principal with a key on the route, under each class it holds, but the proposer and those whose no is final. */
const possibleApprovals = (f: HeldCallFacts, registry: WitnessRegistry, refused: ReadonlySet<string>): ReadonlyArray<Approval> =>
  registry
    .principals()
    .filter((p) => independent(f, registry, p) && !refused.has(p) && registry.keysOf(p).length > 0 && onRoute(f, registry, p))
    .flatMap((p) => registry.classesOf(p).map((c) => ({ witness: p, class: c })))

/**
 * The contract's evidence terms no standing evidence meets now: a valid, unexpired `evidence`
 * statement of this generation, from a witness the term's `by` admits (never the proposer, its
 * key still registered), whose record meets the term for the call's arguments (EvidenceTerm.ts).
 */
export const unmetEvidenceTerms = (f: HeldCallFacts, ctx: CountingContext): ReadonlyArray<EvidenceTerm> => {
  const terms = f.witness_contract?.evidence ?? []
  if (terms.length === 0) return terms
  const args = canonicalCall(f)?.args ?? {}
  const statements = standing(f, ctx).filter((e) => e.status === "valid" && e.decision === "evidence" && e.record !== undefined && Date.parse(e.expires_at) > ctx.now)
  return terms.filter((t) => !statements.some((e) => routeAdmits(t.by, e.witness, ctx.classesOf(e.witness)) && meetsTerm(t, e.record!, args)))
}

/** Where the witness rule of a held call stands, and the final noes behind it. */
export interface Outlook {
  readonly status: RuleStatus
  readonly refusals: ReadonlyArray<Refusal>
}

/**
 * Evaluates the active rule three-valued. A rule that cannot be met is still pending while a
 * timeout fallback that routes to another rule is yet to apply and that rule can be met.
 */
export const outlookOf = (f: HeldCallFacts, ctx: CountingContext): Outlook => remembered(outlookMemo, f, ctx, outlookNow)

const outlookNow = (f: HeldCallFacts, ctx: CountingContext): Outlook => {
  const refusals = refusalsOf(f, ctx)
  if (f.active_rule === null) return { status: "pending", refusals }
  const approvals = countingApprovals(f, ctx)
  const possible = possibleApprovals(f, ctx, new Set(refusals.map((r) => r.witness)))
  const ruled = ruleStatus(f.active_rule, approvals, possible)
  // The rule's approvals are not enough while an evidence term is unmet: it may still be met.
  const status = ruled === "satisfied" && unmetEvidenceTerms(f, ctx).length > 0 ? "pending" : ruled
  const fb = f.witness_contract?.fallback
  if (status === "unsatisfiable" && fb?.action === "route" && !sameRule(f.active_rule, fb.rule) && ruleStatus(fb.rule, approvals, possible) !== "unsatisfiable") {
    return { status: "pending", refusals }
  }
  return { status, refusals }
}

/** The reasons a call is denied with when its rule can no longer be met: each final no, or that no registered witness could ever meet it. */
export const unsatisfiableReasons = (o: Outlook): ReadonlyArray<Reason> =>
  o.refusals.length > 0
    ? o.refusals.map((r) => ({ by: r.witness, reason: r.reason }))
    : [{ by: "kernel", reason: "no registered witnesses can satisfy the witness rule" }]

const sameRule = (a: WitnessRule | null, b: WitnessRule): boolean => a !== null && JSON.stringify(a) === JSON.stringify(b)
