import { type Clock, type Context, Effect, Either } from "effect"
import { KernelConfig } from "../KernelConfig.js"
import { HeldCallStore, type Loaded } from "../ledger/HeldCallStore.js"
import { acquireLease, releaseLease } from "../ledger/Leases.js"
import type { NoResponders, ReadbackReply, ToolClient, ToolUnanswered } from "../ledger/ToolClient.js"
import { canonicalCall } from "../heldcall/Facts.js"
import { claimOf, dispatchEvent, readbackStep, resolveStep, unreachedBackoffMs, type Claim, type ReadbackOutcome } from "../heldcall/plan/Execution.js"
import type { HeldEvent } from "../schema/Events.js"
import { PolicyStore } from "../policy/PolicyStore.js"
import type { HeldCallFacts } from "../schema/Facts.js"
import { progress, requeue, type ActionResult } from "./Actions.js"
import { readbackTool, toolServiceKeys } from "../executor/ToolClient.js"
import type { ActivePolicy } from "../policy/ActivePolicy.js"

const leaseKey = (heldId: string) => `effect.${heldId}`

/**
 * Runs `body` holding the KV recovery lease of a held call, so two workers never resolve the
 * same lost dispatch at once; when another live worker holds it, comes back when it ends.
 */
const withEffectLease = <E, R>(heldId: string, clock: Clock.Clock, body: Effect.Effect<ActionResult, E, R>) =>
  Effect.gen(function* () {
    const cfg = yield* KernelConfig
    const now = clock.unsafeCurrentTimeMillis()
    const got = yield* acquireLease(leaseKey(heldId), cfg.owner, cfg.leaseMs, now)
    if (!("lease" in got)) return requeue(got.until - now + 10)
    return yield* body.pipe(Effect.ensuring(releaseLease(got.lease).pipe(Effect.ignore)))
  })

/** The claim of a call's effect (heldcall/plan/Execution.ts); the driver commits it, with the recovery wake in the same flush, before `invoke` calls the tool. */
export const claim = claimOf
export type { Claim }
export { unreachedBackoffMs }

/**
 * Calls the tool of a claimed call (`f`: the facts with the committed claim) with its
 * idempotency key and hands what it observed to the core (`dispatchEvent`): the effect, an
 * unreached tool, or a lost reply. On the captured tool client: no service lookup between the
 * claim and the record. Only a reply signed by the tool's registered service (`policy`) is
 * accepted when one is registered. `now` reads the drive's clock once the tool answered.
 */
export const invoke = (tools: Context.Tag.Service<typeof ToolClient>, toolTimeoutMs: number, f: HeldCallFacts, policy: ActivePolicy, now: () => number): Effect.Effect<HeldEvent> => {
  const call = canonicalCall(f)!
  return Effect.match(tools.invoke({ tool: call.tool, heldId: f.held_id, idempotencyKey: f.spec!.idempotency_key, args: call.args, serviceKeys: toolServiceKeys(policy, call.tool) }, toolTimeoutMs), {
    onSuccess: (reply): HeldEvent => dispatchEvent(f, reply.ok ? { _tag: "Replied", ok: true, result: reply.result } : { _tag: "Replied", ok: false, error: reply.error }, now()),
    onFailure: (e): HeldEvent => dispatchEvent(f, e._tag === "NoResponders" ? { _tag: "NoResponders" } : { _tag: "Unanswered", reason: e.reason }, now())
  })
}

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

const readbackOutcome = (rb: Either.Either<ReadbackReply, ToolUnanswered | NoResponders>): ReadbackOutcome =>
  Either.isLeft(rb)
    ? rb.left._tag === "ToolUnanswered" ? { _tag: "Unanswered" } : { _tag: "NoResponders" }
    : rb.right.applied ? { _tag: "Answered", applied: true, result: rb.right.result } : { _tag: "Answered", applied: false }

/**
 * The `resolve` action: performs the core's plan for a lost dispatch or an unknown outcome
 * (heldcall/plan/Execution.ts `resolveStep`, `readbackStep`): records what it says, asks the
 * tool's read-back when it says so, or waits.
 */
export const resolve = (heldId: string) =>
  Effect.gen(function* () {
    const clock = yield* Effect.clock
    return yield* withEffectLease(
      heldId,
      clock,
      Effect.gen(function* () {
        const store = yield* HeldCallStore
        const cfg = yield* KernelConfig
        const fresh = yield* store.load(heldId)
        if (fresh === null) return progress
        const f = fresh.facts
        const call = canonicalCall(f)
        if (call === null) return progress
        const policy = yield* (yield* PolicyStore).current
        const rule = policy.rules.get(call.tool)
        let step = resolveStep(f, call.tool, rule, clock.unsafeCurrentTimeMillis())
        if (step._tag === "ReadBack") {
          const rb = yield* readbackTool(call.tool, f.spec!.idempotency_key, cfg.toolTimeoutMs, toolServiceKeys(policy, call.tool)).pipe(Effect.either)
          step = readbackStep(f, call.tool, rule, readbackOutcome(rb), clock.unsafeCurrentTimeMillis())
        }
        switch (step._tag) {
          case "Record":
            yield* store.append(fresh, step.events)
            return progress
          case "Wait":
            return requeue(step.ms)
          default:
            return progress
        }
      })
    )
  })

export { leaseKey }
