import { Context, Effect, Either, Layer, Schema } from "effect"
import { ReevaluationKeyPrefix, ReevaluationProgress, reevaluationKey } from "../schema/ReevaluationProgress.js"
import { Buckets } from "../schema/Subjects.js"
import { LedgerError } from "../schema/LedgerError.js"
import { Nats } from "./Nats.js"

/** Where the re-evaluation of open calls after a policy change stands, per epoch and shard. */
export class ReevaluationProgressStore extends Context.Tag("wk/ReevaluationProgressStore")<
  ReevaluationProgressStore,
  {
    /** The shard's record (null: none, or one this kernel cannot read). */
    readonly read: (epoch: number, shard: number) => Effect.Effect<ReevaluationProgress | null, LedgerError>
    readonly write: (progress: ReevaluationProgress) => Effect.Effect<void, LedgerError>
    /** Deletes the records of epochs older than `epoch` (any kernel may; deleting twice is harmless). */
    readonly forgetOlder: (epoch: number) => Effect.Effect<void, LedgerError>
  }
>() {}

const decodeProgress = Schema.decodeUnknownEither(Schema.parseJson(ReevaluationProgress))

/** Records in the `wk_policy` bucket under `reevaluation.<epoch>.<shard>`. */
export const layerNatsReevaluationProgressStore = Layer.effect(
  ReevaluationProgressStore,
  Effect.map(Nats, ({ kv }) => {
    const on = <A>(operation: string, f: (bucket: Awaited<ReturnType<typeof kv>>) => Promise<A>) =>
      Effect.tryPromise({
        try: async () => f(await kv(Buckets.policy)),
        catch: (cause) => new LedgerError({ operation, message: String(cause), cause })
      })
    return ReevaluationProgressStore.of({
      read: (epoch, shard) =>
        on("read re-evaluation progress", async (b) => {
          const e = await b.get(reevaluationKey(epoch, shard))
          if (e === null || e.operation !== "PUT") return null
          const decoded = decodeProgress(e.string())
          return Either.isRight(decoded) ? decoded.right : null
        }),
      write: (p) => on("write re-evaluation progress", (b) => b.put(reevaluationKey(p.epoch, p.shard), JSON.stringify(p))).pipe(Effect.asVoid),
      forgetOlder: (epoch) =>
        on("forget old re-evaluation progress", async (b) => {
          const old: Array<string> = []
          for await (const k of await b.keys(`${ReevaluationKeyPrefix}>`)) if (Number(k.split(".")[1]) < epoch) old.push(k)
          for (const k of old) await b.delete(k)
        })
    })
  })
)
