import type { HeldEvent } from "../schema/Events.js"
import { EventIds } from "./EventIds.js"
import type { HeldCallFacts } from "../schema/Facts.js"
import type { WitnessContract, WitnessRule } from "../schema/WitnessContract.js"
import { beforeDispatch } from "./Facts.js"
import { evolve } from "./Reducer.js"
import { failedDependency, openDependencies } from "./Dependencies.js"
import { classesOf, principalsOf } from "./WitnessRuleEval.js"
import { countingApprovals, outlookOf, unsatisfiableReasons, vetoOf, type WitnessRegistry } from "./Counting.js"

export { countingApprovals, vetoOf } from "./Counting.js"

/** What the reconciler knows of the world besides the facts. Time arrives here, not from a clock. */
export interface ReconcileContext extends WitnessRegistry {
  readonly now: number
  readonly policyEpoch: number
  /** Most local events one tick may derive before it is an error, not a spin. */
  readonly bound?: number
  /** How an unacknowledged delivery is republished (default `DefaultDeliveryRetry`). */
  readonly delivery?: DeliveryRetry
  /**
   * Events already folded into the facts on top of `last_seq` and not yet committed (a driver
   * batches a decision's events into one commit). Local event ids count on from there, so two
   * derivations on one committed sequence never share an id.
   */
  readonly uncommitted?: number
}

/**
 * Republishing of an unacknowledged delivery: after attempt n the next waits
 * `min(maxMs, baseMs * 2^(n-1))`; none is published once the call's expiry plus `graceMs` has
 * passed (a `delivery.stopped` event records the stop).
 */
export interface DeliveryRetry {
  readonly baseMs: number
  readonly maxMs: number
  readonly graceMs: number
}

export const DefaultDeliveryRetry: DeliveryRetry = { baseMs: 1_000, maxMs: 60_000, graceMs: 15 * 60_000 }

/** Work the reconciler asks for; loops claim it with leases. Level-based: none names an event. */
export type Action =
  | { readonly kind: "adjudicate" }
  | { readonly kind: "execute" }
  | { readonly kind: "resolve" }
  | { readonly kind: "admit" }
  | { readonly kind: "deliver" }
  /** A nested held call ended: record its outcome on the parent and wake the parent. */
  | { readonly kind: "report" }
  /** The call expires soon and its witnesses have not been reminded of this expiry: remind them. */
  | { readonly kind: "remind" }

export interface Plan {
  /** Local facts to append, in order (readiness, expiry, veto, fallback). */
  readonly events: ReadonlyArray<HeldEvent>
  readonly actions: ReadonlyArray<Action>
  /** Reconcile again after this many ms (a timer, not a retry), or never. */
  readonly requeueMs: number | null
  /** The facts after the local events. */
  readonly facts: HeldCallFacts
}

export const DefaultBound = 16

/** The wait after `attempts` deliveries before the next: base, 2 base, 4 base ... capped at max. */
export const deliveryBackoffMs = (attempts: number, retry: DeliveryRetry = DefaultDeliveryRetry): number =>
  Math.min(retry.maxMs, retry.baseMs * 2 ** Math.min(40, Math.max(0, attempts - 1)))

/** When republishing an unacknowledged delivery stops: the call's expiry plus the grace period. */
export const deliveryDeadline = (f: HeldCallFacts, retry: DeliveryRetry = DefaultDeliveryRetry): number =>
  f.spec === null ? Number.NEGATIVE_INFINITY : Date.parse(f.spec.expires_at) + retry.graceMs

/** A published delivery nobody acknowledged, still being republished. */
const republishing = (f: HeldCallFacts): boolean =>
  f.continuation_delivery === "delivered" && f.delivery_last_at !== null && f.delivery_stopped_at === undefined

/**
 * `reconcile(facts, context) -> plan`. Pure. Repeats local derivations until no fact changes
 * (a bounded fixed point); hitting the bound yields one `reconcile.bound_exceeded` event.
 */
export const reconcile = (facts: HeldCallFacts, ctx: ReconcileContext): Plan => {
  const bound = ctx.bound ?? DefaultBound
  const at = new Date(ctx.now).toISOString()
  const events: Array<HeldEvent> = []
  let f = facts
  for (let i = 0; ; i++) {
    const next = nextLocalEvent(f, ctx, facts.last_seq, (ctx.uncommitted ?? 0) + i, at)
    if (next === null) break
    if (i >= bound) {
      const stop: HeldEvent = { type: "reconcile.bound_exceeded", event_id: EventIds.boundExceeded(f.held_id, facts.last_seq), held_id: f.held_id, generation: f.generation, at, bound }
      return { events: [...events, stop], actions: [], requeueMs: null, facts: evolve(f, { seq: f.last_seq, index: events.length, event: stop }) }
    }
    f = evolve(f, { seq: f.last_seq, index: events.length, event: next })
    events.push(next)
  }
  return { events, actions: actionsFor(f, ctx), requeueMs: requeueFor(f, ctx), facts: f }
}

/** Invariant 2, as one predicate: may the effect of the current generation be dispatched now? */
export const mayDispatch = (f: HeldCallFacts, ctx: ReconcileContext): boolean =>
  f.spec !== null &&
  f.lifecycle === "open" &&
  (f.execution === "none" || (f.execution === "leased" && !leaseLive(f, ctx))) &&
  f.readiness === "satisfied" &&
  openDependencies(f).length === 0 &&
  failedDependency(f) === undefined &&
  f.policy_epoch_checked === ctx.policyEpoch &&
  f.policy_epoch <= ctx.policyEpoch &&
  (f.resend === true || Date.parse(f.spec.expires_at) > ctx.now) &&
  (f.unreached === undefined || Date.parse(f.unreached.retry_at) <= ctx.now) &&
  (f.verdict === "ALLOW" || (f.verdict === "REQUIRE_WITNESS" && f.active_rule !== null && outlookOf(f, ctx).status === "satisfied" && vetoOf(f, ctx) === undefined))

/** A claiming worker may still be dispatching or recording: others wait for its lease to end. */
export const leaseLive = (f: HeldCallFacts, ctx: ReconcileContext): boolean => f.lease_until !== null && Date.parse(f.lease_until) > ctx.now

/** Whether the evidence is up to date with the policy this kernel holds. */
const checked = (f: HeldCallFacts, ctx: ReconcileContext): boolean =>
  f.verdict !== "pending" && f.policy_epoch_checked === ctx.policyEpoch && f.policy_epoch <= ctx.policyEpoch

const nextLocalEvent = (f: HeldCallFacts, ctx: ReconcileContext, seq: number, step: number, at: string): HeldEvent | null => {
  if (f.spec === null) return null
  if (f.outcome !== null && republishing(f) && ctx.now >= deliveryDeadline(f, ctx.delivery)) {
    const grace = (ctx.delivery ?? DefaultDeliveryRetry).graceMs
    return {
      held_id: f.held_id,
      generation: f.generation,
      at,
      type: "delivery.stopped",
      event_id: EventIds.deliveryStopped(f.held_id, f.delivery_id ?? ""),
      delivery_id: f.delivery_id ?? "",
      attempts: f.delivery_attempts,
      reason: `not acknowledged by the call's expiry (${f.spec.expires_at}) plus the delivery grace period (${grace} ms)`
    }
  }
  if (f.lifecycle !== "open") return null
  const base = { held_id: f.held_id, generation: f.generation, at }
  const id = (type: string) => EventIds.derived(type, f.held_id, seq, step)
  // An idempotent re-send is owed even past expiry: the first send may have applied the effect.
  if (beforeDispatch(f) && f.resend !== true && Date.parse(f.spec.expires_at) <= ctx.now) {
    const unreached = f.unreached
    return unreached === undefined
      ? { ...base, type: "call.expired", event_id: id("call.expired") }
      : { ...base, type: "call.expired", event_id: id("call.expired"), reasons: [{ by: "kernel", reason: `the tool was unreachable until the call expired (${unreached.attempts} attempts): ${unreached.reason}` }] }
  }
  // A nested held call that was refused or ended without completing fails its parent closed.
  const failed = beforeDispatch(f) ? failedDependency(f) : undefined
  if (failed !== undefined) {
    return { ...base, type: "call.denied", event_id: id("call.denied"), reasons: [{ by: "kernel", reason: failed.reason }] }
  }
  if (!checked(f, ctx)) {
    return f.readiness === "satisfied" ? { ...base, type: "readiness.changed", event_id: id("readiness.changed"), readiness: "stale", policy_epoch: ctx.policyEpoch } : null
  }
  if (!beforeDispatch(f)) return null
  if (f.verdict === "DENY") return { ...base, type: "call.denied", event_id: id("call.denied"), reasons: f.reasons }
  if (f.verdict === "REQUIRE_WITNESS" && f.witness_contract !== null) {
    const veto = vetoOf(f, ctx)
    if (veto !== undefined) {
      // The vetoing witness's own words travel with the denial to the agent.
      const reason = veto.kind === "reject" ? `veto by ${veto.class} witness ${veto.witness}${veto.statement !== undefined ? `: ${veto.statement}` : ""}` : `veto by witness ${veto.witness}: ${veto.reason}`
      return { ...base, type: "call.denied", event_id: id("call.denied"), reasons: [{ by: veto.witness, reason }] }
    }
    // A rule no witness left can meet ends the call now, naming each final no.
    const outlook = outlookOf(f, ctx)
    if (outlook.status === "unsatisfiable") return { ...base, type: "call.denied", event_id: id("call.denied"), reasons: unsatisfiableReasons(outlook) }
    const fb = f.witness_contract.fallback
    if (fb !== undefined && f.readiness !== "satisfied" && ctx.now >= Date.parse(f.spec.created_at) + fb.after_ms) {
      if (fb.action === "deny") {
        return { ...base, type: "call.denied", event_id: id("call.denied"), reasons: [{ by: "kernel", reason: `no satisfying witness within ${fb.after_ms} ms (fallback: deny)` }] }
      }
      if (!sameRule(f.active_rule, fb.rule)) {
        return { ...base, type: "witness.fallback_applied", event_id: id("witness.fallback_applied"), rule: fb.rule }
      }
    }
  }
  const witnessed = f.verdict === "ALLOW" || (f.active_rule !== null && outlookOf(f, ctx).status === "satisfied")
  // Waiting on a nested held call is just a fact: the call stays parked, no worker waits.
  const want = witnessed && openDependencies(f).length === 0 ? "satisfied" : "unsatisfied"
  if (want !== f.readiness) return { ...base, type: "readiness.changed", event_id: id("readiness.changed"), readiness: want, policy_epoch: ctx.policyEpoch }
  return null
}

const actionsFor = (f: HeldCallFacts, ctx: ReconcileContext): ReadonlyArray<Action> => {
  if (f.spec === null) return []
  const actions: Array<Action> = []
  if (beforeDispatch(f) && !checked(f, ctx) && f.policy_epoch <= ctx.policyEpoch) actions.push({ kind: "adjudicate" })
  if (mayDispatch(f, ctx)) actions.push({ kind: "execute" })
  if ((f.execution === "dispatched" && !leaseLive(f, ctx)) || (f.execution === "outcome-unknown" && !f.needs_witness && readbackDue(f, ctx))) actions.push({ kind: "resolve" })
  if (f.execution === "effect-recorded" && f.result_admission === "pending") actions.push({ kind: "admit" })
  if (f.outcome !== null && f.spec.parent_held_id !== undefined && f.parent_reported !== true) actions.push({ kind: "report" })
  if (f.outcome !== null && dueDelivery(f, ctx)) actions.push({ kind: "deliver" })
  if (reminderDue(f, ctx)) actions.push({ kind: "remind" })
  return actions
}

/**
 * When the witnesses of a held call are reminded of its expiry: a tenth of its hold before it
 * (at least a second, at most ten minutes), once per expiry (an extension earns a new one).
 */
export const reminderAt = (f: HeldCallFacts): number => {
  const expires = Date.parse(f.spec!.expires_at)
  const hold = expires - Date.parse(f.spec!.created_at)
  return expires - Math.min(600_000, Math.max(1_000, hold / 10))
}

const reminderDue = (f: HeldCallFacts, ctx: ReconcileContext): boolean =>
  f.spec !== null && f.held && f.lifecycle === "open" && beforeDispatch(f) && f.verdict === "REQUIRE_WITNESS" && f.readiness !== "satisfied" &&
  f.reminded_for !== f.spec.expires_at && ctx.now >= reminderAt(f) && ctx.now < Date.parse(f.spec.expires_at)

/** A read-back that last reached no tool service is asked again from its `retry_at`. */
const readbackDue = (f: HeldCallFacts, ctx: ReconcileContext): boolean =>
  f.readback_unreached === undefined || Date.parse(f.readback_unreached.retry_at) <= ctx.now

/** The first delivery is always published (however late the call ended); republishing is bounded. */
const dueDelivery = (f: HeldCallFacts, ctx: ReconcileContext): boolean =>
  f.continuation_delivery === "pending" ||
  (republishing(f) && ctx.now < deliveryDeadline(f, ctx.delivery) && ctx.now >= Date.parse(f.delivery_last_at!) + deliveryBackoffMs(f.delivery_attempts, ctx.delivery))

const requeueFor = (f: HeldCallFacts, ctx: ReconcileContext): number | null => {
  if (f.spec === null) return null
  const times: Array<number> = []
  if (beforeDispatch(f)) {
    times.push(Date.parse(f.spec.expires_at))
    const fb = f.witness_contract?.fallback
    if (fb !== undefined && f.readiness !== "satisfied") times.push(Date.parse(f.spec.created_at) + fb.after_ms)
    // An approval's expiry can change readiness.
    for (const e of countingApprovals(f, ctx)) times.push(Date.parse(e.expires_at))
    if (f.unreached !== undefined) times.push(Date.parse(f.unreached.retry_at))
    if (f.held && f.verdict === "REQUIRE_WITNESS" && f.reminded_for !== f.spec.expires_at) times.push(reminderAt(f))
  }
  if ((f.execution === "leased" || f.execution === "dispatched") && f.lease_until !== null) times.push(Date.parse(f.lease_until) + 1)
  if (f.execution === "outcome-unknown" && !f.needs_witness && f.readback_unreached !== undefined) times.push(Date.parse(f.readback_unreached.retry_at))
  if (f.outcome !== null && republishing(f)) {
    times.push(Date.parse(f.delivery_last_at!) + deliveryBackoffMs(f.delivery_attempts, ctx.delivery))
    // Wake at the deadline to record the stop.
    times.push(deliveryDeadline(f, ctx.delivery))
  }
  const future = times.filter((t) => Number.isFinite(t) && t > ctx.now)
  return future.length === 0 ? null : Math.max(1, Math.min(...future) - ctx.now)
}

const sameRule = (a: WitnessRule | null, b: WitnessRule): boolean => a !== null && JSON.stringify(a) === JSON.stringify(b)

/** Classes and principals whose approval a contract counts (its rule and fallback route; not its vetoes or evidence terms). */
export const approvingWitnesses = (c: WitnessContract): { classes: ReadonlyArray<string>; principals: ReadonlyArray<string> } => {
  const rules = [c.rule, ...(c.fallback?.action === "route" ? [c.fallback.rule] : [])]
  return { classes: [...new Set(rules.flatMap(classesOf))], principals: [...new Set(rules.flatMap(principalsOf))] }
}

/** Classes and principals a contract admits as witnesses (rule, fallback route and veto). */
export const admittedWitnesses = (c: WitnessContract): { classes: ReadonlyArray<string>; principals: ReadonlyArray<string> } => {
  const rules = [c.rule, ...(c.fallback?.action === "route" ? [c.fallback.rule] : [])]
  return {
    classes: [...new Set([...rules.flatMap(classesOf), ...(c.veto ?? [])])],
    principals: [...new Set(rules.flatMap(principalsOf))]
  }
}
