import type { Envelope } from "../../schema/Envelope.js"
import type { EventOf } from "../../schema/Events.js"
import type { HeldCallFacts } from "../../schema/Facts.js"
import type { ExtendPayload } from "../../schema/Requests.js"
import { notFound, type Reply } from "../../schema/Reply.js"
import { jcsDigest } from "../../schema/Canonical.js"
import type { WitnessRegistry } from "../Counting.js"
import { EventIds } from "../EventIds.js"
import { answer, atOf, type DecideContext, type Decision } from "./Decision.js"
import { judgeWitnessBinding } from "./WitnessBinding.js"

/** `wk.v1.held.extend`: a witness moves a held call's expiry later. */
export interface Extend {
  readonly _tag: "Extend"
  readonly payload: ExtendPayload
  readonly envelope: Envelope
}

/**
 * An extension that a witness the contract admits signs for the call it was shown (bound like
 * an attestation): the call now expires at `extend_to`, which must be later than its expiry and
 * at most the policy's hold time (`heldTtlMs`) from now. It approves nothing; a reminder goes out
 * again before the new expiry.
 */
export const decideExtend = (f: HeldCallFacts, { payload: p, envelope }: Extend, ctx: DecideContext): Decision => {
  if (f.spec === null) return answer(notFound(f.held_id))
  const id = EventIds.extended(f.held_id, jcsDigest(p))
  if (f.seen.includes(id)) return { reply: { status: 200, disposition: "duplicate" }, events: [], drive: "fresh" }
  const refused = judgeExtend(f, p, envelope, ctx, ctx.now, ctx.heldTtlMs)
  if (refused !== null) return answer(refused)
  const event: EventOf<"call.extended"> = {
    type: "call.extended",
    event_id: id,
    held_id: f.held_id,
    generation: f.generation,
    at: atOf(ctx),
    witness: p.principal,
    class: p.class,
    expires_at: new Date(Date.parse(p.extend_to)).toISOString(),
    from_expires_at: f.spec.expires_at,
    ...(p.reason !== undefined ? { reason: p.reason } : {}),
    envelope
  }
  return { reply: { status: 202, disposition: "accepted", expires_at: event.expires_at }, events: [event], drive: "cached" }
}

/** Why an extension is refused (null: accepted); the auditor applies it again to every recorded one. */
export const judgeExtend = (f: HeldCallFacts, p: ExtendPayload, envelope: Envelope, registry: WitnessRegistry, now: number, heldTtlMs: number): Reply | null => {
  const refused = judgeWitnessBinding(f, p, envelope, registry, now, "extension")
  if (refused !== null) return refused
  const to = Date.parse(p.extend_to)
  if (to <= Date.parse(f.spec!.expires_at)) return { status: 422, disposition: "invalid", reason: `extend_to ${p.extend_to} is not later than the call's expiry ${f.spec!.expires_at}` }
  if (to > now + heldTtlMs) return { status: 422, disposition: "invalid", reason: `extend_to ${p.extend_to} is more than the policy's hold time (${heldTtlMs} ms) from now` }
  return null
}
