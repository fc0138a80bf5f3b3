import { Effect, Either, Schema } from "effect"
import type { Nats } from "../ledger/Nats.js"
import type { DeliveryMessage } from "./checks/Check.js"
import { readOrdered, streamLayout } from "./StreamReader.js"

const decodeDelivery = Schema.decodeUnknownEither(
  Schema.parseJson(
    Schema.Struct({
      held_id: Schema.String,
      delivery_id: Schema.String,
      outcome: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null }),
      admission: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null }),
      result: Schema.optional(Schema.Unknown)
    })
  )
)
const text = new TextDecoder()

/** The deliveries of some calls, or why they could not be read. */
export type Deliveries =
  | { readonly _tag: "read"; readonly byHeld: ReadonlyMap<string, ReadonlyArray<DeliveryMessage>> }
  | { readonly _tag: "skipped"; readonly note: string }

/** Deliveries of the selected calls from the sessions stream; unreadable (permissions) is a skip, not an error. */
export const readDeliveries = (stream: string, calls: ReadonlyMap<string, unknown>): Effect.Effect<Deliveries, never, Nats> =>
  Effect.gen(function* () {
    const layout = yield* Effect.either(streamLayout(stream))
    if (Either.isLeft(layout)) return { _tag: "skipped" as const, note: `cannot read ${stream}: ${layout.left.message}` }
    const byHeld = new Map<string, Array<DeliveryMessage>>()
    const read = yield* Effect.either(
      readOrdered(stream, { fromSeq: layout.right.firstSeq }, layout.right.lastSeq, (m) => {
        const d = decodeDelivery(text.decode(m.data))
        if (Either.isLeft(d) || !calls.has(d.right.held_id)) return
        const list = byHeld.get(d.right.held_id) ?? []
        list.push({ seq: m.seq, ...d.right, result: d.right.result ?? null })
        byHeld.set(d.right.held_id, list)
      })
    )
    if (Either.isLeft(read)) return { _tag: "skipped" as const, note: `cannot read ${stream}: ${read.left.message}` }
    return { _tag: "read" as const, byHeld: byHeld as ReadonlyMap<string, ReadonlyArray<DeliveryMessage>> }
  })

