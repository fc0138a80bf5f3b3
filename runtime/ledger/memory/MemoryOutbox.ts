import { Context, Effect, Layer } from "effect"
import { Outbox, sameNotice, type WitnessNotice } from "../Outbox.js"

/** A message the memory outbox holds. */
export interface Published {
  readonly subject: "delivery" | "witness-request"
  /** The session (deliveries) or the held call (witness requests). */
  readonly to: string
  readonly body: unknown
}

/** What the kernel published, for tests to read. */
export class MemoryOutbox extends Context.Tag("wk/MemoryOutbox")<MemoryOutbox, { readonly published: () => ReadonlyArray<Published> }>() {}

/** The outbox in memory: a delivery's message id is stored once, as the results stream's duplicate window does. */
export const makeMemoryOutbox = Effect.sync(() => {
  const published: Array<Published> = []
  const ids = new Set<string>()
  const port = Outbox.of({
    deliver: (sessionId, body, messageId) =>
      Effect.sync(() => {
        if (ids.has(messageId)) return
        ids.add(messageId)
        published.push({ subject: "delivery", to: sessionId, body })
      }),
    requestWitnesses: (heldId, body) => Effect.sync(() => void published.push({ subject: "witness-request", to: heldId, body })),
    ensureWitnessRequest: (heldId, body) =>
      Effect.sync(() => {
        const last = [...published].reverse().find((p) => p.subject === "witness-request" && p.to === heldId)
        if (last !== undefined && sameNotice(last.body as WitnessNotice, body)) return false
        published.push({ subject: "witness-request", to: heldId, body })
        return true
      })
  })
  return Context.make(Outbox, port).pipe(Context.add(MemoryOutbox, { published: () => published }))
})

export const layerMemoryOutbox = Layer.effectContext(makeMemoryOutbox)
