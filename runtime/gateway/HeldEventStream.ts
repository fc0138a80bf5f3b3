import { Effect, Stream } from "effect"
import { Subjects } from "../schema/Subjects.js"
import { KernelLink } from "./KernelLink.js"

const enc = new TextEncoder()
const frame = (event: string, data: unknown, id?: number) => enc.encode(`${id !== undefined ? `id: ${id}\n` : ""}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)

/**
 * Server-sent events of one held call: every stored event from the first (`event: held-event`,
 * id = stream sequence), each followed by the call's facts as `held.get` then answers
 * (`event: facts`), so a page can redraw without reloading. Ends when the client goes.
 */
export const heldEventStream = (heldId: string) =>
  Effect.gen(function* () {
    const link = yield* KernelLink
    return Stream.asyncScoped<Uint8Array>((emit) =>
      Effect.gen(function* () {
        // Facts reads are chained so frames keep the order of the events.
        let chain = Promise.resolve()
        const stop = yield* link.follow(heldId, ({ seq, event }) => {
          void emit.single(frame("held-event", { seq, ...event }, seq))
          chain = chain.then(async () => {
            const got = await Effect.runPromise(Effect.either(link.request(Subjects.get, { held_id: heldId })))
            if (got._tag === "Right" && got.right.status === 200) void emit.single(frame("facts", got.right["held"]))
          })
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
