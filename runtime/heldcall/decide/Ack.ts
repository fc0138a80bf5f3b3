import type { Envelope } from "../../schema/Envelope.js"
import type { EventOf } from "../../schema/Events.js"
import type { HeldCallFacts } from "../../schema/Facts.js"
import type { AckPayload } from "../../schema/Requests.js"
import { conflict, forbidden, invalidRequest, notFound } from "../../schema/Reply.js"
import { deliveryIdOf, EventIds } from "../EventIds.js"
import { answer, atOf, type DecideContext, type Decision } from "./Decision.js"

/** `wk.v1.held.ack`: the session has the result; delivery stops. */
export interface Ack {
  readonly _tag: "Ack"
  readonly payload: AckPayload
  readonly envelope: Envelope
}

const acknowledged = { status: 200, continuation_delivery: "acknowledged" }

/**
 * Only the proposer acknowledges, only an ended call's current delivery, and only once that
 * delivery is recorded as published; again is a no-op. Execution is not touched. The kernel
 * publishes a delivery and then records it, so an agent can hold a delivery whose record is
 * still on its way (or whose publisher died before writing it): its ack is refused as
 * `not_delivered` until the record is there, as the auditor requires (no acknowledgment
 * without a publication before it).
 */
export const decideAck = (f: HeldCallFacts, { payload: p, envelope }: Ack, ctx: DecideContext): Decision => {
  if (f.spec === null) return answer(notFound(f.held_id))
  if (p.principal !== f.spec.principal) return answer(forbidden(`only '${f.spec.principal}' acknowledges this call's delivery`))
  if (f.outcome === null) return answer(conflict("not_delivered", `held call ${f.held_id} has no result yet`))
  const deliveryId = deliveryIdOf(f)
  if (p.delivery_id !== deliveryId) return answer(invalidRequest(`payload.delivery_id: expected ${deliveryId}`, "payload.delivery_id"))
  if (f.continuation_delivery === "acknowledged") return answer(acknowledged)
  if (f.continuation_delivery === "pending") return answer(conflict("not_delivered", `the delivery of held call ${f.held_id} is not recorded as published yet; acknowledge it again shortly`))
  const event: EventOf<"delivery.acknowledged"> = {
    held_id: f.held_id,
    generation: f.generation,
    at: atOf(ctx),
    type: "delivery.acknowledged",
    event_id: EventIds.deliveryAcknowledged(f.held_id, p.delivery_id),
    delivery_id: p.delivery_id,
    envelope
  }
  return { reply: acknowledged, events: [event] }
}
