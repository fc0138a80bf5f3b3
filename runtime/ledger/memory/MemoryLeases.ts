import { Effect, Layer } from "effect"
import { Leases, type LeaseTaken } from "../Leases.js"

/** Leases in memory: the same take-over rules as the KV leases, a revision per write. */
export const makeMemoryLeases = Effect.sync(() => {
  const held = new Map<string, { readonly owner: string; readonly until: number; readonly revision: number }>()
  let revision = 0
  return Leases.of({
    acquire: (key, owner, ttlMs, now) =>
      Effect.sync((): LeaseTaken => {
        const cur = held.get(key)
        if (cur !== undefined && cur.owner !== owner && cur.until > now) return { heldBy: cur.owner, until: cur.until }
        const lease = { key, owner, revision: ++revision, until: now + ttlMs }
        held.set(key, lease)
        return { lease }
      }),
    release: (lease) =>
      Effect.sync(() => {
        if (held.get(lease.key)?.revision === lease.revision) held.delete(lease.key)
      })
  })
})

export const layerMemoryLeases = Layer.effect(Leases, makeMemoryLeases)
