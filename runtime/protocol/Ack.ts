import { Effect } from "effect"
import { HeldCallStore } from "../ledger/HeldCallStore.js"
import { eventOf } from "../loops/Actions.js"
import { deliveryIdOf } from "../loops/Deliver.js"
import type { DeliveryAcknowledged } from "../schema/Events.js"
import { AckPayload } from "../schema/Requests.js"
import { conflict, forbidden, invalidRequest, notFound, unavailable, type Reply } from "./Replies.js"
import { signedRequest } from "./Request.js"

/** `wk.v1.held.ack`: the session has the result; delivery stops. Execution is not touched. */
export const ack = (data: Uint8Array) =>
  Effect.gen(function* () {
    const { payload: p, envelope } = yield* signedRequest(data, "ack", AckPayload)
    const store = yield* HeldCallStore
    return yield* store.serialized(
      p.held_id,
      Effect.gen(function* () {
        for (let attempt = 0; attempt < 16; attempt++) {
          const loaded = yield* store.load(p.held_id, "cached")
          if (loaded === null || loaded.facts.spec === null) return notFound(p.held_id)
          const f = loaded.facts
          if (p.principal !== f.spec!.principal) return forbidden(`only '${f.spec!.principal}' acknowledges this call's delivery`)
          if (f.outcome === null) return conflict("not_delivered", `held call ${p.held_id} has no result yet`)
          if (p.delivery_id !== deliveryIdOf(f)) return invalidRequest(`payload.delivery_id: expected ${deliveryIdOf(f)}`, "payload.delivery_id")
          if (f.continuation_delivery === "acknowledged") return { status: 200, continuation_delivery: "acknowledged" } satisfies Reply
          const event = eventOf<typeof DeliveryAcknowledged.Type>({
            held_id: p.held_id,
            generation: f.generation,
            type: "delivery.acknowledged",
            event_id: `delivery.acknowledged:${p.held_id}:${p.delivery_id}`,
            delivery_id: p.delivery_id,
            envelope
          })
          const r = yield* store.append(loaded, [event]).pipe(Effect.either)
          if (r._tag === "Right") {
            yield* store.project(r.right)
            return { status: 200, continuation_delivery: "acknowledged" } satisfies Reply
          }
          if (r.left._tag !== "AppendConflict") return yield* r.left
        }
        return unavailable(`held call ${p.held_id} is changing too fast; retry`)
      })
    )
  })
