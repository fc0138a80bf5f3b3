import { Context, Effect, Layer } from "effect"
import { StorageType } from "@nats-io/jetstream"
import type { KV } from "@nats-io/kv"
import { createHash } from "node:crypto"
import { Nats } from "./Nats.js"
import { LedgerError } from "../schema/LedgerError.js"

/** The KV bucket of signed reads' nonces: one key per (reader, nonce), gone after `ReadNonceTtlMs`. */
export const ReadNonceBucket = "wk_read_nonces"

/**
 * How long a used nonce is remembered: twice the kernel's window for a read's `issued_at`
 * (protocol/ReadProof.ts), so a read is refused for its time before its nonce is forgotten.
 */
export const ReadNonceTtlMs = 10 * 60_000

/**
 * Nonces of signed reads, each accepted once, shared by every kernel through JetStream KV (a
 * create-if-absent per nonce, expired by the bucket's TTL). Every gateway forwards its reads to a
 * kernel, so gateways and kernels agree on a nonce's one use.
 */
export class ReadNonces extends Context.Tag("wk/ReadNonces")<
  ReadNonces,
  {
    /** True the first time `scope` (the reader, its nonce and what the read may be used once for) is seen within the TTL. */
    readonly firstUse: (scope: ReadonlyArray<string>) => Effect.Effect<boolean, LedgerError>
  }
>() {}

/** The KV key of a nonce's scope: a digest, so any principal or nonce text makes a valid key. */
export const readNonceKey = (scope: ReadonlyArray<string>): string => createHash("sha256").update(JSON.stringify(scope)).digest("hex")

/** Whether a KV create failed because the key exists (the nonce was used), not for another reason. */
const exists = (e: unknown): boolean => /wrong last sequence|key exists/i.test(String((e as { message?: string })?.message ?? e))

/** Nonces in the `wk_read_nonces` bucket, created (with its TTL) on first use if missing. */
export const layerNatsReadNonces = Layer.effect(
  ReadNonces,
  Effect.map(Nats, ({ kvm }) => {
    let bucket: Promise<KV> | undefined
    const open = (): Promise<KV> => {
      if (bucket === undefined) {
        const created = kvm.create(ReadNonceBucket, { history: 1, ttl: ReadNonceTtlMs, storage: StorageType.File })
        created.catch(() => (bucket = bucket === created ? undefined : bucket))
        bucket = created
      }
      return bucket
    }
    return ReadNonces.of({
      firstUse: (scope) =>
        Effect.tryPromise({
          try: async () => {
            const kv = await open()
            try {
              await kv.create(readNonceKey(scope), "")
              return true
            } catch (e) {
              if (exists(e)) return false
              throw e
            }
          },
          catch: (cause) => new LedgerError({ operation: `record a read nonce in ${ReadNonceBucket}`, message: String(cause), cause })
        })
    })
  })
)
