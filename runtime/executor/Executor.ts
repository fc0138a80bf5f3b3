import { type Context, Effect } from "effect"
import { EventIds } from "../heldcall/EventIds.js"
import { KernelConfig } from "../KernelConfig.js"
import { HeldCallStore, type Loaded } from "../ledger/HeldCallStore.js"
import { acquireLease, releaseLease } from "../ledger/Leases.js"
import { mayDispatch, type ReconcileContext } from "../heldcall/Reconciler.js"
import { canonicalCall } from "../heldcall/Facts.js"
import type { EffectDispatched, EffectOutcomeUnknown, EffectReadback, EffectReadbackUnreached, EffectRecorded, EffectResend, EffectUnreached, ExecutionLeased, HeldEvent } from "../schema/Events.js"
import { PolicyStore } from "../policy/PolicyStore.js"
import type { JsonValue } from "../schema/Json.js"
import type { HeldCallFacts } from "../schema/Facts.js"
import { eventOf, progress, requeue, type ActionResult } from "../loops/Actions.js"
import { readbackTool, toolServiceKeys } from "./ToolClient.js"
import type { ActivePolicy } from "../policy/ActivePolicy.js"
import type { ToolClient } from "../ledger/ToolClient.js"

const leaseKey = (heldId: string) => `effect.${heldId}`

/**
 * Runs `body` holding the KV recovery lease of a held call, so two workers never resolve the
 * same lost dispatch at once; when another live worker holds it, comes back when it ends.
 */
const withEffectLease = <E, R>(heldId: string, body: Effect.Effect<ActionResult, E, R>) =>
  Effect.gen(function* () {
    const cfg = yield* KernelConfig
    const got = yield* acquireLease(leaseKey(heldId), cfg.owner, cfg.leaseMs, Date.now())
    if (!("lease" in got)) return requeue(got.until - Date.now() + 10)
    return yield* body.pipe(Effect.ensuring(releaseLease(got.lease).pipe(Effect.ignore)))
  })

/** An execution claim: the events that claim and dispatch the effect, and the lease they carry. */
export interface Claim {
  readonly events: readonly [HeldEvent, HeldEvent]
  readonly leaseUntil: number
}

/**
 * The `execute` action's claim (invariant 2), in memory. The claim is the log itself:
 * `execution.leased` (with its lease end) and `effect.dispatched` are committed with
 * expected-last-subject-sequence on facts that pass `mayDispatch`, so of several workers exactly
 * one dispatches; the others see the claim and wait for its lease to end. Null when the facts do
 * not allow a dispatch now. The driver commits the claim, with the recovery wake in the same
 * flush, before `invoke` calls the tool.
 */
export const claim = (f: HeldCallFacts, ctx: ReconcileContext, owner: string, leaseMs: number): Claim | null => {
  if (!mayDispatch(f, ctx)) return null
  const heldId = f.held_id
  const key = f.spec!.idempotency_key
  const attempt = f.dispatch_attempts + 1
  const base = { held_id: heldId, generation: f.generation }
  const until = Date.now() + leaseMs
  const leaseUntil = new Date(until).toISOString()
  // Each claim is its own fact: a claim whose holder died before dispatching must not share
  // the next claim's event id, or the log's de-duplication refuses every later claim.
  const leased = eventOf<typeof ExecutionLeased.Type>({ ...base, type: "execution.leased", event_id: EventIds.leased(heldId, key, attempt, owner, leaseUntil), owner, lease_until: leaseUntil })
  const dispatched = eventOf<typeof EffectDispatched.Type>({ ...base, type: "effect.dispatched", event_id: EventIds.dispatched(heldId, key, attempt), idempotency_key: key, attempt, owner, lease_until: leaseUntil, policy_epoch: f.policy_epoch_checked })
  return { events: [leased, dispatched], leaseUntil: until }
}

/**
 * Calls the tool of a claimed call (`f`: the facts with the committed claim) with its
 * idempotency key, and returns what to record: the effect, an unreached tool (no effect
 * happened, try again later), or a lost reply (`outcome-unknown`, settled later by read-back).
 * On the captured tool client: no service lookup between the claim and the record. Only a reply
 * signed by the tool's registered service (`policy`) is accepted when one is registered.
 */
export const invoke = (tools: Context.Tag.Service<typeof ToolClient>, toolTimeoutMs: number, f: HeldCallFacts, policy: ActivePolicy): Effect.Effect<HeldEvent> => {
  const heldId = f.held_id
  const call = canonicalCall(f)!
  const key = f.spec!.idempotency_key
  const attempt = f.dispatch_attempts
  const base = { held_id: heldId, generation: f.generation }
  return Effect.match(tools.invoke({ tool: call.tool, heldId, idempotencyKey: key, args: call.args, serviceKeys: toolServiceKeys(policy, call.tool) }, toolTimeoutMs), {
    onSuccess: (reply): HeldEvent => recorded(heldId, f.generation, key, reply.ok ? { ok: true, result: reply.result } : { ok: false, error: reply.error }, "dispatch"),
    onFailure: (e): HeldEvent =>
      e._tag === "NoResponders"
        ? // Nobody subscribed: the request reached no one, so no effect happened. Try again later.
          eventOf<typeof EffectUnreached.Type>({ ...base, type: "effect.unreached", event_id: EventIds.unreached(heldId, key, attempt), idempotency_key: key, attempt, reason: `no tool service answers ${call.tool}`, retry_at: new Date(Date.now() + unreachedBackoffMs((f.unreached?.attempts ?? 0) + 1)).toISOString() })
        : eventOf<typeof EffectOutcomeUnknown.Type>({ ...base, type: "effect.outcome_unknown", event_id: EventIds.outcomeUnknown(heldId, key, attempt), idempotency_key: key, reason: e.reason, needs_witness: false })
  })
}

/** Retry backoff after a dispatch or a read-back reached no tool service: 0.5 s, 1 s, 2 s ... capped at 30 s. */
export const unreachedBackoffMs = (attempts: number): number => Math.min(30_000, 500 * 2 ** Math.max(0, attempts - 1))

const recorded = (heldId: string, generation: number, key: string, r: { ok: true; result: JsonValue } | { ok: false; error: string }, via: "dispatch" | "readback") =>
  eventOf<typeof EffectRecorded.Type>({ held_id: heldId, generation, type: "effect.recorded", event_id: EventIds.recorded(heldId, key), idempotency_key: key, ...r, via })

/**
 * Appends what an effect did, re-reading on conflicts (a policy change may land between
 * dispatch and record). Dying here is what read-back recovery is for.
 */
export const recordSurely = (loaded: Loaded, event: HeldEvent) =>
  Effect.gen(function* () {
    const store = yield* HeldCallStore
    let current: Loaded | null = loaded
    for (let i = 0; i < 20 && current !== null; i++) {
      if (current.facts.seen.includes(event.event_id) || current.facts.execution === "effect-recorded") return
      const r = yield* store.append(current, [event]).pipe(Effect.either)
      if (r._tag === "Right") return
      if (r.left._tag !== "AppendConflict") return yield* r.left
      current = yield* store.load(loaded.facts.held_id)
    }
  })

/**
 * The `resolve` action: a dispatch whose worker is gone becomes `outcome-unknown`; an unknown
 * outcome is settled by the tool's read-back (applied: record it; absent: dispatch again under
 * the same key). Whether the tool has read-back is what its rule declares (`readback`, default
 * true), never inferred from an error: a read-back that reaches nobody is an outage, asked again
 * with backoff until the call expires. A tool declared idempotent is sent the same key again
 * instead; otherwise an outcome read-back cannot settle asks for a read-back witness or an admin.
 */
export const resolve = (heldId: string) =>
  withEffectLease(
    heldId,
    Effect.gen(function* () {
      const store = yield* HeldCallStore
      const cfg = yield* KernelConfig
      const fresh = yield* store.load(heldId)
      if (fresh === null) return progress
      const f = fresh.facts
      if (f.lease_until !== null && Date.parse(f.lease_until) > Date.now() && f.execution === "dispatched") return requeue(Date.parse(f.lease_until) - Date.now() + 10)
      const spec = f.spec!
      const key = spec.idempotency_key
      const base = { held_id: heldId, generation: f.generation }
      const attempt = f.dispatch_attempts
      if (f.execution === "dispatched") {
        yield* store.append(fresh, [
          eventOf<typeof EffectOutcomeUnknown.Type>({ ...base, type: "effect.outcome_unknown", event_id: EventIds.outcomeUnknown(heldId, key, attempt), idempotency_key: key, reason: "the dispatching worker was lost before it recorded the effect", needs_witness: false })
        ])
        return progress
      }
      if (f.execution !== "outcome-unknown" || f.needs_witness) return progress
      const retryAt = f.readback_unreached === undefined ? 0 : Date.parse(f.readback_unreached.retry_at)
      if (retryAt > Date.now()) return requeue(retryAt - Date.now())
      const tool = canonicalCall(f)!.tool
      const policy = yield* (yield* PolicyStore).current
      const rule = policy.rules.get(tool)
      // Sending the same key again to a tool that applies each key at most once is always safe.
      const resend = (why: string) =>
        store.append(fresh, [
          eventOf<typeof EffectResend.Type>({ ...base, type: "effect.resend", event_id: EventIds.resend(heldId, key, attempt), idempotency_key: key, reason: `tool '${tool}' ${why} and is declared idempotent: sent again under the same key` })
        ])
      const askWitness = (why: string) =>
        store.append(fresh, [
          eventOf<typeof EffectOutcomeUnknown.Type>({ ...base, type: "effect.outcome_unknown", event_id: EventIds.outcomeUnknown(heldId, key, attempt, true), idempotency_key: key, reason: `${why}; a read-back witness or an admin must settle whether the effect happened`, needs_witness: true })
        ])
      if (rule?.readback === false) {
        yield* rule.idempotent === true ? resend("has no read-back") : askWitness(`tool '${tool}' has no read-back`)
        return progress
      }
      const rb = yield* readbackTool(tool, key, cfg.toolTimeoutMs, toolServiceKeys(policy, tool)).pipe(Effect.either)
      if (rb._tag === "Left") {
        if (rb.left._tag === "ToolUnanswered") return requeue(1000)
        // Nobody serves the read-back: the tool is down.
        if (rule?.idempotent === true) {
          yield* resend("is unreachable for read-back")
          return progress
        }
        const attempts = (f.readback_unreached?.attempts ?? 0) + 1
        const reason = `no tool service answers the read-back of ${tool}`
        if (Date.parse(spec.expires_at) <= Date.now()) {
          yield* askWitness(`${reason} until the call expired (${attempts} attempts)`)
          return progress
        }
        yield* store.append(fresh, [
          eventOf<typeof EffectReadbackUnreached.Type>({ ...base, type: "effect.readback_unreached", event_id: EventIds.readbackUnreached(heldId, key, attempt, attempts), idempotency_key: key, attempt: attempts, reason, retry_at: new Date(Date.now() + unreachedBackoffMs(attempts)).toISOString() })
        ])
        return progress
      }
      const readback = eventOf<typeof EffectReadback.Type>({ ...base, type: "effect.readback", event_id: EventIds.readback(heldId, key, attempt), idempotency_key: key, applied: rb.right.applied })
      yield* store.append(fresh, rb.right.applied ? [readback, recorded(heldId, f.generation, key, { ok: true, result: rb.right.result }, "readback")] : [readback])
      return progress
    })
  )

export { leaseKey }
