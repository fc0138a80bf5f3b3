import { Context, Effect, Layer } from "effect"
import { Buckets } from "../schema/Subjects.js"
import { LedgerError, isWrongLastSequence } from "../schema/LedgerError.js"
import { Nats } from "./Nats.js"

/** A held lease: the key and the revision that proves ownership. */
export interface Lease {
  readonly key: string
  readonly owner: string
  readonly revision: number
  readonly until: number
}

/** What taking a lease gave: the lease, or who holds it and until when. */
export type LeaseTaken = { readonly lease: Lease } | { readonly heldBy: string; readonly until: number }

/** Leases shared by every kernel process (the effect recovery lease, the archiver's, the re-evaluation shards'). */
export class Leases extends Context.Tag("wk/Leases")<
  Leases,
  {
    /**
     * Takes a lease: create-if-absent, or a revision CAS over an expired one (or our own).
     * Answers who holds it while another owner holds an unexpired lease.
     */
    readonly acquire: (key: string, owner: string, ttlMs: number, now: number) => Effect.Effect<LeaseTaken, LedgerError>
    /** Releases a lease we still own (a lease taken over by someone else is left alone). */
    readonly release: (lease: Lease) => Effect.Effect<void, LedgerError>
  }
>() {}

/** `Leases.acquire` on the service. */
export const acquireLease = (key: string, owner: string, ttlMs: number, now: number) => Effect.flatMap(Leases, (l) => l.acquire(key, owner, ttlMs, now))

/** `Leases.release` on the service. */
export const releaseLease = (lease: Lease) => Effect.flatMap(Leases, (l) => l.release(lease))

interface LeaseValue {
  readonly owner: string
  readonly until: number
}

const encoder = new TextEncoder()

/** Leases in the `wk_leases` KV bucket, ownership proven by the entry's revision. */
export const layerNatsLeases = Layer.effect(
  Leases,
  Effect.map(Nats, (nats) =>
    Leases.of({
      acquire: (key, owner, ttlMs, now) =>
        Effect.tryPromise({
          try: async (): Promise<LeaseTaken> => {
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
        }),
      release: (lease) =>
        Effect.tryPromise({
          try: async () => {
            const kv = await nats.kv(Buckets.leases)
            await kv.delete(lease.key, { previousSeq: lease.revision }).catch((e) => {
              if (!isWrongLastSequence(e)) throw e
            })
          },
          catch: (cause) => new LedgerError({ operation: `release lease ${lease.key}`, message: String(cause), cause })
        })
    })
  )
)
