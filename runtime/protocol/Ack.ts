import { Effect } from "effect"
import { HeldCallStore } from "../ledger/HeldCallStore.js"
import { Nats } from "../ledger/Nats.js"
import { quiescent } from "../heldcall/Facts.js"
import { Buckets } from "../schema/Subjects.js"
import { eventOf } from "../loops/Actions.js"
import { deliveryIdOf } from "../loops/Deliver.js"
import type { DeliveryAcknowledged } from "../schema/Events.js"
import { AckPayload } from "../schema/Requests.js"
import { conflict, forbidden, invalidRequest } from "./Replies.js"
import { signedRequest } from "./Request.js"
import { appendDecided, type Decided } from "./internal/appendDecided.js"

const acknowledged = { status: 200, continuation_delivery: "acknowledged" }

/** `wk.v1.held.ack`: the session has the result; delivery stops. Execution is not touched. */
export const ack = (data: Uint8Array) =>
  Effect.gen(function* () {
    const { payload: p, envelope } = yield* signedRequest(data, "ack", AckPayload)
    const { reply, appended } = yield* appendDecided(p.held_id, (f): Decided => {
      if (p.principal !== f.spec!.principal) return { reply: forbidden(`only '${f.spec!.principal}' acknowledges this call's delivery`) }
      if (f.outcome === null) return { reply: conflict("not_delivered", `held call ${p.held_id} has no result yet`) }
      if (p.delivery_id !== deliveryIdOf(f)) return { reply: invalidRequest(`payload.delivery_id: expected ${deliveryIdOf(f)}`, "payload.delivery_id") }
      if (f.continuation_delivery === "acknowledged") return { reply: acknowledged }
      const event = eventOf<typeof DeliveryAcknowledged.Type>({
        held_id: p.held_id,
        generation: f.generation,
        type: "delivery.acknowledged",
        event_id: `delivery.acknowledged:${p.held_id}:${p.delivery_id}`,
        delivery_id: p.delivery_id,
        envelope
      })
      return { reply: acknowledged, event }
    })
    if (appended !== null) {
      yield* (yield* HeldCallStore).project(appended)
      // Acknowledged, an ended call may have nothing left to happen: it leaves the open-call index.
      if (appended.facts.held && quiescent(appended.facts)) {
        const { kv } = yield* Nats
        yield* Effect.tryPromise(() => kv(Buckets.open).then((open) => open.delete(p.held_id))).pipe(Effect.ignore)
      }
    }
    return reply
  })
