import { Effect } from "effect"
import { Driver } from "../loops/Driver.js"
import { wake } from "../ledger/Wakes.js"
import { eventOf } from "../loops/Actions.js"
import { beforeDispatch } from "../heldcall/Facts.js"
import type { CallCancelled } from "../schema/Events.js"
import { CancelPayload } from "../schema/Requests.js"
import { conflict, forbidden } from "./Replies.js"
import { signedRequest } from "./Request.js"
import { appendDecided, type Decided } from "./internal/appendDecided.js"

const cancelled = { status: 200, lifecycle: "cancelled" }

/** `wk.v1.held.cancel`: idempotent; refused once the effect may have happened. */
export const cancel = (data: Uint8Array) =>
  Effect.gen(function* () {
    const { payload: p, envelope, policy } = yield* signedRequest(data, "cancel", CancelPayload)
    const { reply } = yield* appendDecided(p.held_id, (f): Decided => {
      if (p.principal !== f.spec!.principal && !policy.admins.has(p.principal)) {
        return { reply: forbidden(`principal '${p.principal}' may not cancel a call of '${f.spec!.principal}'`) }
      }
      if (f.lifecycle === "cancelled") return { reply: cancelled }
      if (!beforeDispatch(f) && f.lifecycle === "open") return { reply: conflict("already_dispatched", `held call ${p.held_id} was already dispatched`) }
      if (f.lifecycle !== "open") return { reply: { ...conflict(f.lifecycle === "completed" ? "already_dispatched" : "call_ended", `held call ${p.held_id} is ${f.lifecycle}`), lifecycle: f.lifecycle } }
      const event = eventOf<typeof CallCancelled.Type>({
        held_id: p.held_id,
        generation: f.generation,
        type: "call.cancelled",
        event_id: `call.cancelled:${p.held_id}`,
        by: p.principal,
        reason: p.reason,
        envelope
      })
      return { reply: cancelled, event }
    })
    if (reply.status === 200) {
      yield* wake(p.held_id)
      const driver = yield* Driver
      yield* Effect.forkDaemon(driver.drive(p.held_id).pipe(Effect.ignore))
    }
    return reply
  })
