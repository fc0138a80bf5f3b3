import { Clock, Effect } from "effect"
import { HeldCallStore, type Loaded } from "../ledger/HeldCallStore.js"
import { Outbox } from "../ledger/Outbox.js"
import { commitSigningKey } from "../ledger/CommitSigningKey.js"
import { signDelivery } from "../schema/DeliverySignature.js"
import { SpanKind, tracingEnabled, withSpan } from "../observability/Tracing.js"
import type { HeldCallFacts } from "../schema/Facts.js"
import { progress } from "./Actions.js"
import { deliveryIdOf } from "../heldcall/EventIds.js"
import { deliveryPublished } from "../heldcall/plan/Notices.js"
import { canonicalCall } from "../heldcall/Facts.js"
import { reportedOutcome } from "../heldcall/ReportedOutcome.js"
import { deliveredContinuation } from "../ledger/DeliveredContinuation.js"
import type { DeliveredContinuation } from "../schema/Continuation.js"

/** The stable id of a call's final result delivery. */
export { deliveryIdOf }

/** The message an agent receives on `wk.v1.sessions.<session_id>.results`. */
export const deliveryOf = (f: HeldCallFacts, continuation?: DeliveredContinuation) => {
  const spec = f.spec!
  return {
    held_id: f.held_id,
    session_id: spec.session_id,
    turn_id: spec.turn_id,
    call_id: spec.call_id,
    continuation_ref: spec.continuation_ref ?? null,
    // The continuation the kernel kept for the call, by digest (schema/Continuation.ts).
    ...(continuation !== undefined ? { continuation } : {}),
    // `tool_failed` when the effect ran and the tool reported a failure; `ok` says the same for a completed call.
    outcome: reportedOutcome(f),
    ...(f.outcome === "completed" ? { ok: f.effect?.ok ?? false } : {}),
    admission: f.outcome === "completed" ? f.result_admission : null,
    // Quarantined bytes never leave the kernel (invariant 8).
    result: f.result_admission === "admitted" ? f.result : null,
    ...(f.quarantine ? { quarantine: f.quarantine } : {}),
    ...(f.outcome === "denied" ? { reasons: f.reasons } : {}),
    // A witness changed the arguments before approving: the agent learns what ran and who changed it.
    ...(spec.edited_by !== undefined ? { edited: { by: spec.edited_by.witness, class: spec.edited_by.class, args: spec.args, from_call_digest: spec.edited_by.from_call_digest, ...(spec.edited_by.reason !== undefined ? { reason: spec.edited_by.reason } : {}) } } : {}),
    call_digest: canonicalCall(f)!.call_digest,
    delivery_id: deliveryIdOf(f)
  }
}

/**
 * The `deliver` action: publish the final result into `WK_SESSIONS` (same delivery id on
 * every attempt) and record the attempt. Republishing never reruns the tool.
 */
export const deliver = (loaded: Loaded) =>
  Effect.gen(function* () {
    const store = yield* HeldCallStore
    const outbox = yield* Outbox
    const f = loaded.facts
    const attempt = f.delivery_attempts + 1
    // Signed when the kernel has a key, and chained to the call's last commit when this process
    // holds its digest (prev "" otherwise: the signature still covers the message; audit: `delivery`).
    const key = yield* commitSigningKey
    const continuation = yield* deliveredContinuation(f.spec!.continuation_digest)
    const message = deliveryOf(f, continuation)
    const body = key === undefined ? message : signDelivery(message, f.last_seq, loaded.head ?? "", key)
    const publish = outbox.deliver(f.spec!.session_id, body, `${body.delivery_id}:${attempt}`)
    yield* tracingEnabled() ? withSpan("wk.deliver", publish, { kind: SpanKind.PRODUCER, attributes: { "wk.held_id": f.held_id, "wk.outcome": body.outcome ?? "none", "wk.attempt": attempt } }) : publish
    yield* store.append(loaded, [deliveryPublished(f, attempt, yield* Clock.currentTimeMillis)])
    return progress
  })
