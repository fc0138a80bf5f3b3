import type { EventOf, HeldEvent } from "../../schema/Events.js"
import type { HeldCallFacts } from "../../schema/Facts.js"
import type { JsonValue } from "../../schema/Json.js"
import { atOf } from "../decide/Decision.js"
import { EventIds } from "../EventIds.js"
import { canonicalCall } from "../Facts.js"
import { mayDispatch, type ReconcileContext } from "../Reconciler.js"

/** An execution claim: the events that claim and dispatch the effect, and the lease they carry. */
export interface Claim {
  readonly events: readonly [EventOf<"execution.leased">, EventOf<"effect.dispatched">]
  readonly leaseUntil: number
}

/**
 * The claim of the current generation's effect (invariant 2), or null when the facts do not
 * allow a dispatch at `ctx.now`. The claim is the log itself: `execution.leased` (with its lease
 * end) and `effect.dispatched` are committed with expected-last-subject-sequence on facts that
 * pass `mayDispatch`, so of several workers exactly one dispatches; the others see the claim and
 * wait for its lease to end.
 */
export const claimOf = (f: HeldCallFacts, ctx: ReconcileContext, owner: string, leaseMs: number): Claim | null => {
  if (!mayDispatch(f, ctx)) return null
  const heldId = f.held_id
  const key = f.spec!.idempotency_key
  const attempt = f.dispatch_attempts + 1
  const at = atOf(ctx)
  const base = { held_id: heldId, generation: f.generation, at }
  const until = ctx.now + leaseMs
  const leaseUntil = new Date(until).toISOString()
  // Each claim is its own fact: a claim whose holder died before dispatching must not share
  // the next claim's event id, or the log's de-duplication refuses every later claim.
  return {
    events: [
      { ...base, type: "execution.leased", event_id: EventIds.leased(heldId, key, attempt, owner, leaseUntil), owner, lease_until: leaseUntil },
      { ...base, type: "effect.dispatched", event_id: EventIds.dispatched(heldId, key, attempt), idempotency_key: key, attempt, owner, lease_until: leaseUntil, policy_epoch: f.policy_epoch_checked }
    ],
    leaseUntil: until
  }
}

/** What the tool said to one dispatch, as the drive observed it. */
export type DispatchOutcome =
  | { readonly _tag: "Replied"; readonly ok: true; readonly result: JsonValue }
  | { readonly _tag: "Replied"; readonly ok: false; readonly error: string }
  /** Nobody subscribed: the request reached no one, so no effect happened. */
  | { readonly _tag: "NoResponders" }
  /** The request went out and no reply came back: the effect may or may not have happened. */
  | { readonly _tag: "Unanswered"; readonly reason: string }

/** Retry backoff after a dispatch or a read-back reached no tool service: 0.5 s, 1 s, 2 s ... capped at 30 s. */
export const unreachedBackoffMs = (attempts: number): number => Math.min(30_000, 500 * 2 ** Math.max(0, attempts - 1))

const recordedOf = (f: HeldCallFacts, r: { readonly ok: true; readonly result: JsonValue } | { readonly ok: false; readonly error: string }, via: "dispatch" | "readback", now: number): EventOf<"effect.recorded"> => {
  const key = f.spec!.idempotency_key
  return { held_id: f.held_id, generation: f.generation, at: atOf({ now }), type: "effect.recorded", event_id: EventIds.recorded(f.held_id, key), idempotency_key: key, ...(r.ok ? { ok: true, result: r.result } : { ok: false, error: r.error }), via }
}

/**
 * What one dispatch of a claimed call (`f`: its facts with the claim committed) records: the
 * effect, an unreached tool (no effect happened; dispatch again after the backoff), or a lost
 * reply (`outcome-unknown`, settled later by read-back).
 */
export const dispatchEvent = (f: HeldCallFacts, outcome: DispatchOutcome, now: number): HeldEvent => {
  const heldId = f.held_id
  const key = f.spec!.idempotency_key
  const attempt = f.dispatch_attempts
  const base = { held_id: heldId, generation: f.generation, at: atOf({ now }) }
  switch (outcome._tag) {
    case "Replied":
      return recordedOf(f, outcome, "dispatch", now)
    case "NoResponders": {
      const retryAt = new Date(now + unreachedBackoffMs((f.unreached?.attempts ?? 0) + 1)).toISOString()
      return { ...base, type: "effect.unreached", event_id: EventIds.unreached(heldId, key, attempt), idempotency_key: key, attempt, reason: `no tool service answers ${canonicalCall(f)!.tool}`, retry_at: retryAt }
    }
    case "Unanswered":
      return { ...base, type: "effect.outcome_unknown", event_id: EventIds.outcomeUnknown(heldId, key, attempt), idempotency_key: key, reason: outcome.reason, needs_witness: false }
  }
}

/** What the tool's rule declares about settling an unknown outcome. */
export interface ResolveRule {
  /** The tool answers read-back (default true). */
  readonly readback?: boolean
  /** The tool applies each idempotency key at most once: sending the key again is safe. */
  readonly idempotent?: boolean
}

/** The next step of resolving a lost dispatch or an unknown outcome. */
export type ResolveStep =
  /** Record these events (on the facts the step was planned on), then plan again. */
  | { readonly _tag: "Record"; readonly events: ReadonlyArray<HeldEvent> }
  /** Ask the tool's read-back, then plan its answer with `readbackEvents`. */
  | { readonly _tag: "ReadBack" }
  /** Look again after this many ms. */
  | { readonly _tag: "Wait"; readonly ms: number }
  /** Nothing to resolve. */
  | { readonly _tag: "Done" }

const resend = (f: HeldCallFacts, tool: string, why: string, now: number): EventOf<"effect.resend"> => {
  const key = f.spec!.idempotency_key
  return { held_id: f.held_id, generation: f.generation, at: atOf({ now }), type: "effect.resend", event_id: EventIds.resend(f.held_id, key, f.dispatch_attempts), idempotency_key: key, reason: `tool '${tool}' ${why} and is declared idempotent: sent again under the same key` }
}

const askWitness = (f: HeldCallFacts, why: string, now: number): EventOf<"effect.outcome_unknown"> => {
  const key = f.spec!.idempotency_key
  return { held_id: f.held_id, generation: f.generation, at: atOf({ now }), type: "effect.outcome_unknown", event_id: EventIds.outcomeUnknown(f.held_id, key, f.dispatch_attempts, true), idempotency_key: key, reason: `${why}; a read-back witness or an admin must settle whether the effect happened`, needs_witness: true }
}

/**
 * The `resolve` action's plan on fresh facts at `now`: a dispatch whose worker is gone (its
 * lease ended) becomes `outcome-unknown`; an unknown outcome is settled by the tool's read-back.
 * Whether the tool has read-back is what its rule declares, never inferred from an error. A tool
 * without read-back declared idempotent is sent the same key again; otherwise a read-back
 * witness or an admin must settle it.
 */
export const resolveStep = (f: HeldCallFacts, tool: string, rule: ResolveRule | undefined, now: number): ResolveStep => {
  if (f.spec === null) return { _tag: "Done" }
  if (f.execution === "dispatched") {
    if (f.lease_until !== null && Date.parse(f.lease_until) > now) return { _tag: "Wait", ms: Date.parse(f.lease_until) - now + 10 }
    const key = f.spec.idempotency_key
    return {
      _tag: "Record",
      events: [{ held_id: f.held_id, generation: f.generation, at: atOf({ now }), type: "effect.outcome_unknown", event_id: EventIds.outcomeUnknown(f.held_id, key, f.dispatch_attempts), idempotency_key: key, reason: "the dispatching worker was lost before it recorded the effect", needs_witness: false }]
    }
  }
  if (f.execution !== "outcome-unknown" || f.needs_witness) return { _tag: "Done" }
  const retryAt = f.readback_unreached === undefined ? 0 : Date.parse(f.readback_unreached.retry_at)
  if (retryAt > now) return { _tag: "Wait", ms: Math.max(1, Math.ceil(retryAt - now)) }
  if (rule?.readback === false) return { _tag: "Record", events: [rule.idempotent === true ? resend(f, tool, "has no read-back", now) : askWitness(f, `tool '${tool}' has no read-back`, now)] }
  return { _tag: "ReadBack" }
}

/** What the tool's read-back said, as the drive observed it. */
export type ReadbackOutcome =
  | { readonly _tag: "Answered"; readonly applied: true; readonly result: JsonValue }
  | { readonly _tag: "Answered"; readonly applied: false }
  | { readonly _tag: "NoResponders" }
  | { readonly _tag: "Unanswered" }

/** What a read-back's answer records (or how long to wait when it reached a service that did not answer). */
export const readbackStep = (f: HeldCallFacts, tool: string, rule: ResolveRule | undefined, outcome: ReadbackOutcome, now: number): ResolveStep => {
  const key = f.spec!.idempotency_key
  const attempt = f.dispatch_attempts
  const at = atOf({ now })
  const base = { held_id: f.held_id, generation: f.generation, at }
  switch (outcome._tag) {
    case "Unanswered":
      return { _tag: "Wait", ms: 1000 }
    case "NoResponders": {
      // Nobody serves the read-back: the tool is down.
      if (rule?.idempotent === true) return { _tag: "Record", events: [resend(f, tool, "is unreachable for read-back", now)] }
      const attempts = (f.readback_unreached?.attempts ?? 0) + 1
      const reason = `no tool service answers the read-back of ${tool}`
      if (Date.parse(f.spec!.expires_at) <= now) return { _tag: "Record", events: [askWitness(f, `${reason} until the call expired (${attempts} attempts)`, now)] }
      const retryAt = new Date(now + unreachedBackoffMs(attempts)).toISOString()
      return { _tag: "Record", events: [{ ...base, type: "effect.readback_unreached", event_id: EventIds.readbackUnreached(f.held_id, key, attempt, attempts), idempotency_key: key, attempt: attempts, reason, retry_at: retryAt }] }
    }
    case "Answered": {
      const readback: EventOf<"effect.readback"> = { ...base, type: "effect.readback", event_id: EventIds.readback(f.held_id, key, attempt), idempotency_key: key, applied: outcome.applied }
      return { _tag: "Record", events: outcome.applied ? [readback, recordedOf(f, { ok: true, result: outcome.result }, "readback", now)] : [readback] }
    }
  }
}
