import { Effect, Layer } from "effect"
import { judgeCounter, PasskeyCounters } from "../PasskeyCounters.js"

/** Passkey counters in memory (one process), judged as the KV store judges them. */
export const layerMemoryPasskeyCounters = Layer.sync(PasskeyCounters, () => {
  const last = new Map<string, { readonly counter: number; readonly assertion: string }>()
  return PasskeyCounters.of({
    advance: (credentialId, counter, assertion) =>
      Effect.sync(() => {
        const v = judgeCounter(last.get(credentialId), counter, assertion)
        if (v.write) last.set(credentialId, { counter, assertion })
        return v.ok ? { ok: true as const } : { ok: false as const, last: v.last }
      })
  })
})
