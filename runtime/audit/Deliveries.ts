import { Effect, Either, Schema } from "effect"
import type { LedgerReader } from "../ledger/LedgerReader.js"
import type { DeliveryMessage } from "./checks/Check.js"
import { readOrdered, streamLayout } from "./StreamReader.js"
import { compileGuard } from "./internal/compileGuard.js"
import { deliveryChainOf, deliverySignatureValid } from "../schema/DeliverySignature.js"

/** The fields of a delivery message (protocol.md, "Delivery to the parked session") the checks read. */
const DeliveryBody = Schema.Struct({
  held_id: Schema.String,
  delivery_id: Schema.String,
  outcome: Schema.optional(Schema.NullOr(Schema.String)),
  admission: Schema.optional(Schema.NullOr(Schema.String)),
  result: Schema.optional(Schema.Unknown)
})
const isDelivery = compileGuard(DeliveryBody)
const text = new TextDecoder()

const parseDelivery = (data: Uint8Array): (typeof DeliveryBody.Type & { readonly chain?: DeliveryMessage["chain"] }) | undefined => {
  try {
    const v: unknown = JSON.parse(text.decode(data))
    if (!isDelivery(v)) return undefined
    const chain = deliveryChainOf(v as Record<string, unknown>)
    return chain === undefined ? v : { ...v, chain: { prev_seq: chain.prev_seq, prev: chain.prev, key: chain.key, valid: deliverySignatureValid(v as Record<string, unknown>, chain) } }
  } catch {
    return undefined
  }
}

/** The deliveries of some calls, or why they could not be read. */
export type Deliveries =
  | { readonly _tag: "read"; readonly byHeld: ReadonlyMap<string, ReadonlyArray<DeliveryMessage>>; readonly from: number }
  | { readonly _tag: "skipped"; readonly note: string }

/** Deliveries of the selected calls from the sessions stream; unreadable (permissions) is a skip, not an error. */
export const readDeliveries = (stream: string, calls: ReadonlyMap<string, unknown>): Effect.Effect<Deliveries, never, LedgerReader> =>
  Effect.gen(function* () {
    const layout = yield* Effect.either(streamLayout(stream))
    if (Either.isLeft(layout)) return { _tag: "skipped" as const, note: `cannot read ${stream}: ${layout.left.message}` }
    const byHeld = new Map<string, Array<DeliveryMessage>>()
    // Only when the stream's head was removed (first sequence past 1) can deliveries have aged
    // out: before its oldest message (or anything, when it holds none), absence proves nothing.
    const aged = layout.right.firstSeq > 1
    let from = aged ? Number.POSITIVE_INFINITY : Number.NEGATIVE_INFINITY
    const read = yield* Effect.either(
      readOrdered(stream, { fromSeq: layout.right.firstSeq }, layout.right.lastSeq, (m) => {
        if (aged && from === Number.POSITIVE_INFINITY) from = m.time
        const d = parseDelivery(m.data)
        if (d === undefined || !calls.has(d.held_id)) return
        const list = byHeld.get(d.held_id) ?? []
        list.push({ seq: m.seq, held_id: d.held_id, delivery_id: d.delivery_id, outcome: d.outcome ?? null, admission: d.admission ?? null, result: d.result ?? null, time: m.time, ...(d.chain !== undefined ? { chain: d.chain } : {}) })
        byHeld.set(d.held_id, list)
      })
    )
    if (Either.isLeft(read)) return { _tag: "skipped" as const, note: `cannot read ${stream}: ${read.left.message}` }
    return { _tag: "read" as const, byHeld: byHeld as ReadonlyMap<string, ReadonlyArray<DeliveryMessage>>, from }
  })

