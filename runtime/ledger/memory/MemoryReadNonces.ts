import { Effect, Layer } from "effect"
import { ReadNonces, ReadNonceTtlMs, readNonceKey } from "../ReadNonces.js"

/** Nonces in memory (one process), with the same TTL. */
export const layerMemoryReadNonces = Layer.sync(ReadNonces, () => {
  const seen = new Map<string, number>()
  return ReadNonces.of({
    firstUse: (scope) =>
      Effect.sync(() => {
        const now = Date.now()
        for (const [k, at] of seen) if (now - at > ReadNonceTtlMs) seen.delete(k)
        const key = readNonceKey(scope)
        if (seen.has(key)) return false
        seen.set(key, now)
        return true
      })
  })
})
