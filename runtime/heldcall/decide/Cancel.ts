import type { Envelope } from "../../schema/Envelope.js"
import type { EventOf } from "../../schema/Events.js"
import type { HeldCallFacts } from "../../schema/Facts.js"
import type { CancelPayload } from "../../schema/Requests.js"
import { conflict, forbidden, notFound } from "../../schema/Reply.js"
import { EventIds } from "../EventIds.js"
import { beforeDispatch } from "../Facts.js"
import { answer, atOf, type DecideContext, type Decision } from "./Decision.js"

/** `wk.v1.held.cancel`: the proposer or a policy admin withdraws a call. */
export interface Cancel {
  readonly _tag: "Cancel"
  readonly payload: CancelPayload
  readonly envelope: Envelope
}

/** The kernel withdraws a parked call whose session went away (`cancel_on_disconnect`). */
export interface Disconnect {
  readonly _tag: "Disconnect"
  readonly sessionId: string
}

const cancelled = { status: 200, lifecycle: "cancelled" }

const cancelledEvent = (f: HeldCallFacts, by: string, reason: string, ctx: DecideContext, envelope?: Envelope): EventOf<"call.cancelled"> => ({
  held_id: f.held_id,
  generation: f.generation,
  at: atOf(ctx),
  type: "call.cancelled",
  event_id: EventIds.cancelled(f.held_id),
  by,
  reason,
  ...(envelope !== undefined ? { envelope } : {})
})

/**
 * Idempotent; refused once the effect may have happened, and to anyone but the proposer and a
 * policy admin. A cancelled call is driven (its delivery to the agent).
 */
export const decideCancel = (f: HeldCallFacts, { payload: p, envelope }: Cancel, ctx: DecideContext): Decision => {
  if (f.spec === null) return answer(notFound(f.held_id))
  if (p.principal !== f.spec.principal && !ctx.isAdmin(p.principal)) return answer(forbidden(`principal '${p.principal}' may not cancel a call of '${f.spec.principal}'`))
  if (f.lifecycle === "cancelled") return { reply: cancelled, events: [], drive: "fresh" }
  if (f.lifecycle === "open" && !beforeDispatch(f)) return answer(conflict("already_dispatched", `held call ${f.held_id} was already dispatched`))
  if (f.lifecycle !== "open") return answer({ ...conflict(f.lifecycle === "completed" ? "already_dispatched" : "call_ended", `held call ${f.held_id} is ${f.lifecycle}`), lifecycle: f.lifecycle })
  return { reply: cancelled, events: [cancelledEvent(f, p.principal, p.reason, ctx, envelope)], drive: "cached" }
}

/** Cancels an open call whose effect cannot have started; anything else is left alone (409). */
export const decideDisconnect = (f: HeldCallFacts, { sessionId }: Disconnect, ctx: DecideContext): Decision => {
  if (f.spec === null) return answer(notFound(f.held_id))
  if (f.lifecycle !== "open" || !beforeDispatch(f)) return answer({ status: 409 })
  return { reply: { status: 200 }, events: [cancelledEvent(f, "kernel", `session ${sessionId} disconnected (cancel_on_disconnect)`, ctx)], drive: "cached" }
}
