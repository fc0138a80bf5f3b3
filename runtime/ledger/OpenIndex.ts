import { Context, Effect, Layer } from "effect"
import { Nats } from "./Nats.js"
import { LedgerError } from "../schema/LedgerError.js"
import { Buckets } from "../schema/Subjects.js"

/**
 * The index of open held calls: parked calls, and ended ones whose delivery is still owed. What
 * a policy change must revisit and what the recovery sweep walks.
 */
export class OpenIndex extends Context.Tag("wk/OpenIndex")<
  OpenIndex,
  {
    readonly add: (heldId: string) => Effect.Effect<void, LedgerError>
    readonly remove: (heldId: string) => Effect.Effect<void, LedgerError>
    /** As `remove`, reading first so an absent entry costs no write. */
    readonly removeIfPresent: (heldId: string) => Effect.Effect<void, LedgerError>
    /** Every indexed held id, ascending: the order background walks use, so a cursor means the same after a restart. */
    readonly list: Effect.Effect<ReadonlyArray<string>, LedgerError>
  }
>() {}

/** Every held id in the open-call index, ascending. */
export const openHeldIds: Effect.Effect<ReadonlyArray<string>, LedgerError, OpenIndex> = Effect.flatMap(OpenIndex, (i) => i.list)

/** The shard of a held call among `shards`: FNV-1a of its id, so every kernel agrees without coordination. */
export const shardOf = (heldId: string, shards: number): number => {
  let h = 0x811c9dc5
  for (let i = 0; i < heldId.length; i++) {
    h ^= heldId.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return (h >>> 0) % shards
}

/** The index in the `wk_open` KV bucket (one key per held id). */
export const layerNatsOpenIndex = Layer.effect(
  OpenIndex,
  Effect.map(Nats, ({ kv }) => {
    const on = <A>(operation: string, f: (bucket: Awaited<ReturnType<typeof kv>>) => Promise<A>) =>
      Effect.tryPromise({
        try: async () => f(await kv(Buckets.open)),
        catch: (cause) => new LedgerError({ operation: `${operation} ${Buckets.open}`, message: String(cause), cause })
      })
    return OpenIndex.of({
      add: (heldId) => on("put", (b) => b.put(heldId, "1")).pipe(Effect.asVoid),
      remove: (heldId) => on("delete", (b) => b.delete(heldId)),
      removeIfPresent: (heldId) =>
        on("delete", async (b) => {
          const entry = await b.get(heldId)
          if (entry !== null && entry.operation === "PUT") await b.delete(heldId)
        }),
      list: on("list", async (b) => {
        const keys: Array<string> = []
        for await (const k of await b.keys()) keys.push(k)
        return keys.sort()
      })
    })
  })
)
