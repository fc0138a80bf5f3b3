import { Context, Effect, Layer } from "effect"
import { StorageType } from "@nats-io/jetstream"
import type { KV } from "@nats-io/kv"
import { createHash } from "node:crypto"
import { counterAdvances } from "../schema/PasskeyAssertion.js"
import { Nats } from "./Nats.js"
import { LedgerError } from "../schema/LedgerError.js"

/** The KV bucket of passkeys' signature counters: one key per credential, its last counter and assertion. */
export const PasskeyCounterBucket = "wk_passkey_counters"

/** Whether an assertion's counter was taken, or the last counter it does not follow. */
export type CounterVerdict = { readonly ok: true } | { readonly ok: false; readonly last: number }

/**
 * The last signature counter seen per passkey, shared by every kernel through JetStream KV (a
 * compare-and-set per credential). An assertion is taken when its counter follows the last one
 * (`counterAdvances`), or when it is the very assertion last taken (the same signed request sent
 * again is answered as a duplicate downstream, never counted twice).
 */
export class PasskeyCounters extends Context.Tag("wk/PasskeyCounters")<
  PasskeyCounters,
  { readonly advance: (credentialId: string, counter: number, assertionDigest: string) => Effect.Effect<CounterVerdict, LedgerError> }
>() {}

/** The KV key of a credential: a digest, so any credential id makes a valid key. */
export const passkeyCounterKey = (credentialId: string): string => createHash("sha256").update(credentialId).digest("hex")

interface Stored {
  readonly counter: number
  readonly assertion: string
}

/** The verdict on `next` after `stored`, and what to store when it is taken. */
export const judgeCounter = (stored: Stored | undefined, counter: number, assertion: string): CounterVerdict & { readonly write: boolean } => {
  if (stored !== undefined && stored.assertion === assertion) return { ok: true, write: false }
  return counterAdvances(stored?.counter, counter) ? { ok: true, write: true } : { ok: false, last: stored!.counter, write: false }
}

const MaxRaces = 8

/** Counters in the `wk_passkey_counters` bucket, created on first use if missing. */
export const layerNatsPasskeyCounters = Layer.effect(
  PasskeyCounters,
  Effect.map(Nats, ({ kvm }) => {
    let bucket: Promise<KV> | undefined
    const open = (): Promise<KV> => {
      if (bucket === undefined) {
        const created = kvm.create(PasskeyCounterBucket, { history: 1, storage: StorageType.File })
        created.catch(() => (bucket = bucket === created ? undefined : bucket))
        bucket = created
      }
      return bucket
    }
    return PasskeyCounters.of({
      advance: (credentialId, counter, assertion) =>
        Effect.tryPromise({
          try: async (): Promise<CounterVerdict> => {
            const kv = await open()
            const key = passkeyCounterKey(credentialId)
            const value = JSON.stringify({ counter, assertion })
            // Compare-and-set: another kernel may take an assertion of the same credential at once.
            for (let i = 0; i < MaxRaces; i++) {
              const entry = await kv.get(key)
              const stored = entry === null || entry.operation !== "PUT" ? undefined : (JSON.parse(entry.string()) as Stored)
              const v = judgeCounter(stored, counter, assertion)
              if (!v.write) return v.ok ? { ok: true } : { ok: false, last: v.last }
              try {
                if (entry === null) await kv.create(key, value)
                else await kv.update(key, value, entry.revision)
                return { ok: true }
              } catch (e) {
                if (!/wrong last sequence|key exists/i.test(String((e as { message?: string })?.message ?? e))) throw e
              }
            }
            throw new Error(`passkey counter of ${credentialId} kept changing under ${MaxRaces} attempts`)
          },
          catch: (cause) => new LedgerError({ operation: `advance a passkey counter in ${PasskeyCounterBucket}`, message: String(cause), cause })
        })
    })
  })
)
