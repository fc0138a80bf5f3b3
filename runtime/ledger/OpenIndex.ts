import { Effect } from "effect"
import { Nats } from "./Nats.js"
import { LedgerError } from "./LedgerError.js"
import { Buckets } from "../schema/Subjects.js"

/**
 * Every held id in the open-call index (`wk_open`), ascending: the order background walks use, so
 * a cursor means the same after a restart.
 */
export const openHeldIds: Effect.Effect<ReadonlyArray<string>, LedgerError, Nats> = Effect.gen(function* () {
  const { kv } = yield* Nats
  return yield* Effect.tryPromise({
    try: async () => {
      const bucket = await kv(Buckets.open)
      const keys: Array<string> = []
      for await (const k of await bucket.keys()) keys.push(k)
      return keys.sort()
    },
    catch: (cause) => new LedgerError({ operation: `list ${Buckets.open}`, message: String(cause), cause })
  })
})

/** The shard of a held call among `shards`: FNV-1a of its id, so every kernel agrees without coordination. */
export const shardOf = (heldId: string, shards: number): number => {
  let h = 0x811c9dc5
  for (let i = 0; i < heldId.length; i++) {
    h ^= heldId.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return (h >>> 0) % shards
}

/** Adds a held call to the open-call index (`wk_open`): the recovery sweep and policy changes revisit it. */
export const indexOpen = (heldId: string): Effect.Effect<void, LedgerError, Nats> =>
  Effect.flatMap(Nats, ({ kv }) =>
    Effect.tryPromise({
      try: async () => void (await (await kv(Buckets.open)).put(heldId, "1")),
      catch: (cause) => new LedgerError({ operation: `index ${heldId} in ${Buckets.open}`, message: String(cause), cause })
    })
  )

/** Removes a held call from the open-call index. */
export const unindexOpen = (heldId: string): Effect.Effect<void, LedgerError, Nats> =>
  Effect.flatMap(Nats, ({ kv }) =>
    Effect.tryPromise({
      try: async () => void (await (await kv(Buckets.open)).delete(heldId)),
      catch: (cause) => new LedgerError({ operation: `unindex ${heldId} from ${Buckets.open}`, message: String(cause), cause })
    })
  )
