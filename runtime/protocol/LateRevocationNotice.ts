import { Effect } from "effect"
import { HeldCallStore } from "../ledger/HeldCallStore.js"
import { Nats } from "../ledger/Nats.js"
import { lateRevocationsOf } from "../heldcall/LateRevocations.js"
import { jcsDigest } from "../schema/Canonical.js"
import type { AttestPayload } from "../schema/Requests.js"
import { Subjects } from "../schema/Subjects.js"
import type { Reply } from "./Replies.js"

const encoder = new TextEncoder()

/**
 * After a revoke is recorded: when it withdrew an approval of a call already released
 * (heldcall/LateRevocations.ts), the proposer's session (`wk.v1.sessions.<session>.revocations`)
 * and the witness routes (`wk.v1.witness.revocations.<held_id>`) are told, once per revocation
 * (the message id is its digest), and the witness's reply says so. The event log holds the
 * revocation either way; a notice that cannot be published is not retried (the reply says
 * `notified: false`, and `held.get` still lists the revocation).
 */
export const noticeLateRevocation = (payload: AttestPayload, reply: Reply) =>
  Effect.gen(function* () {
    if (payload.decision !== "revoke" || reply.status !== 409) return reply
    const loaded = yield* (yield* HeldCallStore).load(payload.held_id)
    const f = loaded?.facts
    const digest = jcsDigest(payload)
    const late = f?.spec == null ? undefined : lateRevocationsOf(f).find((r) => r.attestation_digest === digest)
    if (f?.spec == null || late === undefined) return reply
    const notice = {
      type: "revocation.after_release",
      held_id: f.held_id,
      session_id: f.spec.session_id,
      turn_id: f.spec.turn_id,
      call_id: f.spec.call_id,
      tool: f.spec.tool,
      outcome: f.outcome,
      ...late
    }
    const { publish } = yield* Nats
    const body = encoder.encode(JSON.stringify(notice))
    const notified = yield* Effect.tryPromise(() =>
      Promise.all([
        publish(Subjects.sessionRevocations(f.spec!.session_id), body, { msgID: `revoked:${digest}` }),
        publish(Subjects.witnessRevocations(f.held_id), body, { msgID: `revoked:${digest}` })
      ])
    ).pipe(Effect.as(true), Effect.orElseSucceed(() => false))
    return {
      ...reply,
      revoked_after_release: true,
      notified,
      reason: `${(reply as { reason?: string }).reason ?? "stale"}; recorded as a revocation after release: the effect stands, and the proposer's session and the routes are told`
    } as Reply
  })
