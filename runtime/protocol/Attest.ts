import { Effect, FiberRef } from "effect"
import { HeldCalls } from "../loops/HeldCalls.js"
import { AttestPayload } from "../schema/Requests.js"
import type { Reply } from "./Replies.js"
import { callTrace, CurrentTrace, linkTo, tracingEnabled, withSpan } from "../observability/Tracing.js"
import { signedRequest } from "./Request.js"
import { takePasskeyCounter } from "./PasskeyCounter.js"
import { noticeLateRevocation } from "./LateRevocationNotice.js"

/**
 * `wk.v1.held.attest`: records the attestation (signed by an ed25519 key or a passkey, whose
 * signature counter must count up: PasskeyCounter.ts) (accepted or rejected, both as events;
 * heldcall/decide/Attest.ts) and never waits for execution. Traced, what the attestation does
 * to the call (and the release it may start) is a `wk.attestation` span in the call's trace,
 * linked to the witness's `wk.attest` span.
 */
export const attest = (data: Uint8Array) =>
  Effect.gen(function* () {
    const { payload, envelope, policy } = yield* signedRequest(data, "attest", AttestPayload)
    yield* takePasskeyCounter(envelope)
    const handled = (yield* HeldCalls).handle(payload.held_id, { _tag: "Attest", payload, envelope }, { policy })
    const reply = yield* traced(payload, handled)
    // A revoke that came after the call was released is made known (LateRevocationNotice.ts).
    return payload.decision === "revoke" ? yield* noticeLateRevocation(payload, reply) : reply
  })

const traced = <E, R>(payload: AttestPayload, handled: Effect.Effect<{ readonly reply: Reply }, E, R>) =>
  Effect.gen(function* () {
    if (!tracingEnabled()) return (yield* handled).reply
    const witness = yield* FiberRef.get(CurrentTrace)
    const call = callTrace(payload.held_id)
    const attributes = { "wk.held_id": payload.held_id, "wk.decision": payload.decision, "wk.witness": payload.principal }
    return (yield* withSpan("wk.attestation", handled, { attributes, links: linkTo(witness, { "wk.link": "attest" }), ...(call !== undefined ? { parent: call } : {}) })).reply
  })
