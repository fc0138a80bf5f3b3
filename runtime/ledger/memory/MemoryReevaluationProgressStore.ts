import { Effect, Layer } from "effect"
import type { ReevaluationProgress } from "../../schema/ReevaluationProgress.js"
import { ReevaluationProgressStore } from "../ReevaluationProgressStore.js"

/** Re-evaluation progress records in memory. */
export const makeMemoryReevaluationProgressStore = Effect.sync(() => {
  const records = new Map<string, ReevaluationProgress>()
  return ReevaluationProgressStore.of({
    read: (epoch, shard) => Effect.sync(() => records.get(`${epoch}.${shard}`) ?? null),
    write: (p) => Effect.sync(() => void records.set(`${p.epoch}.${p.shard}`, p)),
    forgetOlder: (epoch) =>
      Effect.sync(() => {
        for (const [k, p] of records) if (p.epoch < epoch) records.delete(k)
      })
  })
})

export const layerMemoryReevaluationProgressStore = Layer.effect(ReevaluationProgressStore, makeMemoryReevaluationProgressStore)
