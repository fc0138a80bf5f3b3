import { Effect } from "effect"
import { HeldCallStore } from "../ledger/HeldCallStore.js"
import { Driver } from "../loops/Driver.js"
import { wake } from "../ledger/Wakes.js"
import { eventOf } from "../loops/Actions.js"
import { beforeDispatch } from "../heldcall/Facts.js"
import type { CallCancelled } from "../schema/Events.js"
import { CancelPayload } from "../schema/Requests.js"
import { conflict, forbidden, notFound, unavailable, type Reply } from "./Replies.js"
import { signedRequest } from "./Request.js"

/** `wk.v1.held.cancel`: idempotent; refused once the effect may have happened. */
export const cancel = (data: Uint8Array) =>
  Effect.gen(function* () {
    const { payload: p, envelope, policy } = yield* signedRequest(data, "cancel", CancelPayload)
    const store = yield* HeldCallStore
    const reply: Reply = yield* store.serialized(
      p.held_id,
      Effect.gen(function* () {
        for (let attempt = 0; attempt < 16; attempt++) {
          const loaded = yield* store.load(p.held_id, "cached")
          if (loaded === null || loaded.facts.spec === null) return notFound(p.held_id)
          const f = loaded.facts
          if (p.principal !== f.spec!.principal && !policy.admins.has(p.principal)) {
            return forbidden(`principal '${p.principal}' may not cancel a call of '${f.spec!.principal}'`)
          }
          if (f.lifecycle === "cancelled") return { status: 200, lifecycle: "cancelled" }
          if (!beforeDispatch(f) && f.lifecycle === "open") return conflict("already_dispatched", `held call ${p.held_id} was already dispatched`)
          if (f.lifecycle !== "open") return { ...conflict(f.lifecycle === "completed" ? "already_dispatched" : "call_ended", `held call ${p.held_id} is ${f.lifecycle}`), lifecycle: f.lifecycle }
          const event = eventOf<typeof CallCancelled.Type>({
            held_id: p.held_id,
            generation: f.generation,
            type: "call.cancelled",
            event_id: `call.cancelled:${p.held_id}`,
            by: p.principal,
            reason: p.reason,
            envelope
          })
          const r = yield* store.append(loaded, [event]).pipe(Effect.either)
          if (r._tag === "Right") return { status: 200, lifecycle: "cancelled" }
          if (r.left._tag !== "AppendConflict") return yield* r.left
        }
        return unavailable(`held call ${p.held_id} is changing too fast; retry`)
      })
    )
    if (reply.status === 200) {
      yield* wake(p.held_id)
      const driver = yield* Driver
      yield* Effect.forkDaemon(driver.drive(p.held_id).pipe(Effect.ignore))
    }
    return reply
  })
