import type { NatsConnection } from "@nats-io/transport-node"
import { Objm, type ObjectStore } from "@nats-io/obj"
import { Context, Effect, Layer } from "effect"
import { sha256Hex } from "../schema/Canonical.js"
import { ContinuationBucket, continuationObject } from "../schema/Continuation.js"
import { LedgerError } from "../schema/LedgerError.js"
import { Nats } from "./Nats.js"

/**
 * Where the kernel keeps continuations (schema/Continuation.ts), by the sha256 of their bytes:
 * the object store `wk_continuations` over NATS, a map in memory.
 */
export class Continuations extends Context.Tag("wk/Continuations")<
  Continuations,
  {
    /** Keeps the bytes under their digest and returns it (idempotent: the same bytes, the same object). */
    readonly keep: (bytes: Uint8Array) => Effect.Effect<string, LedgerError>
    /** The bytes kept under a digest, or null when none that hash to it are kept. */
    readonly kept: (digest: string) => Effect.Effect<Uint8Array | null, LedgerError>
  }
>() {}

// Replicas when the bucket is first created: the kernel's WK_REPLICAS, like its other buckets.
const replicas = (): number => Math.max(1, Number(process.env["WK_REPLICAS"] ?? 1) || 1)

const failed = (operation: string) => (cause: unknown) => new LedgerError({ operation, message: `${operation}: ${cause instanceof Error ? cause.message : String(cause)}`, cause })

const natsContinuations = (nc: NatsConnection): Context.Tag.Service<Continuations> => {
  // Opened once (a round trip), again after a failure.
  let bucket: Promise<ObjectStore> | undefined
  const open = (): Promise<ObjectStore> => {
    if (bucket === undefined) {
      const created = new Objm(nc).create(ContinuationBucket, { replicas: replicas() })
      created.catch(() => (bucket = bucket === created ? undefined : bucket))
      bucket = created
    }
    return bucket
  }
  return {
    keep: (bytes) => {
      const digest = sha256Hex(bytes)
      return Effect.tryPromise({
        try: async () => {
          const os = await open()
          if ((await os.info(continuationObject(digest))) === null) await os.putBlob({ name: continuationObject(digest) }, bytes)
          return digest
        },
        catch: failed(`keep continuation ${digest}`)
      })
    },
    kept: (digest) =>
      Effect.tryPromise({
        try: async () => {
          const bytes = await (await open()).getBlob(continuationObject(digest))
          return bytes !== null && sha256Hex(bytes) === digest ? bytes : null
        },
        catch: failed(`read continuation ${digest}`)
      })
  }
}

export const layerNatsContinuations = Layer.effect(Continuations, Effect.map(Nats, ({ nc }) => natsContinuations(nc)))

/** In memory, for tests of the loops. */
export const layerMemoryContinuations = Layer.sync(Continuations, () => {
  const kept = new Map<string, Uint8Array>()
  return {
    keep: (bytes) => Effect.sync(() => {
      const digest = sha256Hex(bytes)
      kept.set(digest, bytes)
      return digest
    }),
    kept: (digest) => Effect.sync(() => kept.get(digest) ?? null)
  }
})
