import { Effect } from "effect"
import { Buckets } from "../schema/Subjects.js"
import { LedgerError, isWrongLastSequence } from "./LedgerError.js"
import { Nats } from "./Nats.js"

/** A held lease: the KV key and the revision that proves ownership. */
export interface Lease {
  readonly key: string
  readonly owner: string
  readonly revision: number
  readonly until: number
}

interface LeaseValue {
  readonly owner: string
  readonly until: number
}

const encoder = new TextEncoder()

/**
 * Takes a lease: create-if-absent, or a revision CAS over an expired one (or our own).
 * Returns null while another owner holds an unexpired lease, with when it ends.
 */
export const acquireLease = (key: string, owner: string, ttlMs: number, now: number) =>
  Effect.gen(function* () {
    const nats = yield* Nats
    return yield* Effect.tryPromise({
      try: async (): Promise<{ lease: Lease } | { heldBy: string; until: number }> => {
        const kv = await nats.kv(Buckets.leases)
        const value: LeaseValue = { owner, until: now + ttlMs }
        const data = encoder.encode(JSON.stringify(value))
        for (let i = 0; i < 4; i++) {
          try {
            const revision = await kv.create(key, data)
            return { lease: { key, owner, revision, until: value.until } }
          } catch (e) {
            if (!isWrongLastSequence(e) && !String(e).includes("exists")) throw e
          }
          const cur = await kv.get(key)
          if (cur === null || cur.operation !== "PUT") continue
          const held = cur.json() as LeaseValue
          if (held.owner !== owner && held.until > now) return { heldBy: held.owner, until: held.until }
          try {
            const revision = await kv.update(key, data, cur.revision)
            return { lease: { key, owner, revision, until: value.until } }
          } catch (e) {
            if (!isWrongLastSequence(e)) throw e
          }
        }
        return { heldBy: "unknown", until: now + ttlMs }
      },
      catch: (cause) => new LedgerError({ operation: `acquire lease ${key}`, message: String(cause), cause })
    })
  })

/** Releases a lease we still own (a lease taken over by someone else is left alone). */
export const releaseLease = (lease: Lease) =>
  Effect.gen(function* () {
    const nats = yield* Nats
    yield* Effect.tryPromise({
      try: async () => {
        const kv = await nats.kv(Buckets.leases)
        await kv.delete(lease.key, { previousSeq: lease.revision }).catch((e) => {
          if (!isWrongLastSequence(e)) throw e
        })
      },
      catch: (cause) => new LedgerError({ operation: `release lease ${lease.key}`, message: String(cause), cause })
    })
  })
