import { Effect, Either, Schema, Stream } from "effect"
import { eventView, type Role } from "../heldcall/Views.js"
import { HeldEvent } from "../schema/Events.js"
import { KernelLink } from "./KernelLink.js"

const enc = new TextEncoder()
const frame = (event: string, data: unknown, id?: string) => enc.encode(`${id !== undefined ? `id: ${id}\n` : ""}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)
const decodeEvent = Schema.decodeUnknownEither(HeldEvent)

/**
 * Server-sent events of one held call as `role` may see them (runtime/heldcall/Views.ts): every
 * stored event from the first (`event: held-event`, id `<seq>.<index>`: the stream sequence of its
 * commit and its index in the commit; data the event with `seq` and `index`). An event that does not
 * decode is left out rather than sent as stored. Ends when the client goes.
 */
export const heldEventStream = (heldId: string, role: Role) =>
  Effect.gen(function* () {
    const link = yield* KernelLink
    return Stream.asyncScoped<Uint8Array>((emit) =>
      Effect.gen(function* () {
        const stop = yield* link.follow(heldId, ({ seq, index, event }) => {
          const decoded = decodeEvent(event)
          if (Either.isRight(decoded)) void emit.single(frame("held-event", { seq, index, ...eventView(role, decoded.right) }, `${seq}.${index}`))
        }).pipe(Effect.orDie)
        // A comment line now and then keeps proxies from closing an idle stream.
        const keepAlive = setInterval(() => void emit.single(enc.encode(": keep-alive\n\n")), 15_000)
        void emit.single(enc.encode(": stream of " + heldId + "\n\n"))
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            clearInterval(keepAlive)
            stop()
          })
        )
      })
    )
  })
