import type { Envelope } from "../../schema/Envelope.js"
import type { EventOf } from "../../schema/Events.js"
import type { HeldCallFacts } from "../../schema/Facts.js"
import type { SettlePayload } from "../../schema/Requests.js"
import { notFound } from "../../schema/Reply.js"
import { jcsDigest } from "../../schema/Canonical.js"
import { EventIds } from "../EventIds.js"
import { canonicalCall } from "../Facts.js"
import { admittedWitnesses } from "../Reconciler.js"
import { answer, atOf, SkewMs, type DecideContext, type Decision } from "./Decision.js"

/** `wk.v1.held.settle`: a read-back witness's or an admin's signed word on whether an unknown outcome happened. */
export interface Settle {
  readonly _tag: "Settle"
  readonly payload: SettlePayload
  readonly envelope: Envelope
}

export type SettleVerdict =
  | { readonly authority: "witness" | "admin" }
  | { readonly status: 403 | 409 | 422; readonly disposition: "forbidden" | "stale" | "invalid"; readonly reason: string }

/**
 * Who may settle an unknown outcome: a policy admin (a determination), or a read-back witness
 * the call's contract admits or the tool's rule names in `readback_witnesses`; never the proposer.
 */
export const judgeSettle = (f: HeldCallFacts, p: SettlePayload, env: Envelope, ctx: DecideContext): SettleVerdict => {
  const spec = f.spec!
  if (f.execution !== "outcome-unknown") return { status: 409, disposition: "stale", reason: `the call's outcome is not unknown (execution: ${f.execution})` }
  if (p.generation !== f.generation) return { status: 409, disposition: "stale", reason: `bound to generation ${p.generation}; the current generation is ${f.generation}` }
  if (p.call_digest !== canonicalCall(f)?.call_digest) return { status: 409, disposition: "stale", reason: "bound to another call digest" }
  if (Date.parse(p.expires_at) <= ctx.now) return { status: 422, disposition: "invalid", reason: `settlement expired at ${p.expires_at}` }
  if (Date.parse(p.issued_at) > ctx.now + SkewMs) return { status: 422, disposition: "invalid", reason: `issued_at ${p.issued_at} is more than ${SkewMs / 1000} s in the future (the allowed clock skew)` }
  if (p.principal === spec.principal || ctx.keysOf(spec.principal).includes(env.key)) {
    return { status: 422, disposition: "invalid", reason: "the proposer cannot settle its own call's outcome" }
  }
  if (ctx.isAdmin(p.principal)) return { authority: "admin" }
  const classes = ctx.classesOf(p.principal)
  const contract = f.witness_contract === null ? { classes: [], principals: [] } : admittedWitnesses(f.witness_contract)
  const named = ctx.readbackWitnesses(canonicalCall(f)!.tool)
  const admits = (n: { readonly classes?: ReadonlyArray<string>; readonly principals?: ReadonlyArray<string> }) =>
    (n.principals ?? []).includes(p.principal) || classes.some((c) => (n.classes ?? []).includes(c))
  if (admits(contract) || (named !== undefined && admits(named))) return { authority: "witness" }
  return { status: 403, disposition: "forbidden", reason: `principal '${p.principal}' is not a read-back witness of this call (contract or the tool's readback_witnesses) nor a policy admin` }
}

/**
 * Records `effect.settled` (202), which ends the call like a recorded effect; the call is then
 * driven (result admission, delivery). The same signed bytes again: 200 duplicate, driven again.
 */
export const decideSettle = (f: HeldCallFacts, { payload: p, envelope }: Settle, ctx: DecideContext): Decision => {
  if (f.spec === null) return answer(notFound(f.held_id))
  const digest = jcsDigest(p)
  const eventId = EventIds.settled(f.held_id, digest)
  if (f.seen.includes(eventId)) return { reply: { status: 200, disposition: "duplicate" }, events: [], drive: "fresh" }
  const j = judgeSettle(f, p, envelope, ctx)
  if (!("authority" in j)) return answer({ status: j.status, disposition: j.disposition, reason: j.reason })
  const event: EventOf<"effect.settled"> = {
    held_id: f.held_id,
    generation: f.generation,
    at: atOf(ctx),
    type: "effect.settled",
    event_id: eventId,
    idempotency_key: f.spec.idempotency_key,
    by: p.principal,
    authority: j.authority,
    decision: p.decision,
    ...(p.result !== undefined ? { result: p.result } : {}),
    ...(p.reason !== undefined ? { reason: p.reason } : {}),
    attestation_digest: digest,
    envelope
  }
  return { reply: { status: 202, disposition: "accepted", authority: j.authority }, events: [event], drive: "fresh" }
}
