// Plugin wasm in JetStream's object store, by digest, so every kernel process loads the same
// bytes. Objects: `wasm/<sha256>` and `manifest/<sha256>` (the signed manifest, JSON).
import type { NatsConnection } from "@nats-io/transport-node"
import { Objm, type ObjectStore } from "@nats-io/obj"
import { Effect, Either, Layer, Schema } from "effect"
import { sha256Hex } from "../schema/Canonical.js"
import { SignedManifest } from "../schema/PluginManifest.js"
import { PluginSource, PluginSourceError } from "../plugins/PluginSource.js"
import { PluginBucket } from "../schema/Subjects.js"

export { PluginBucket }

/** The object store could not be reached or written. */
export class PluginStoreError extends Schema.TaggedError<PluginStoreError>()("PluginStoreError", {
  operation: Schema.String,
  detail: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

// Replicas when the bucket is first created: the kernel's WK_REPLICAS, like its streams and KV
// buckets (runtime/ledger/Provision.ts); an existing bucket keeps its own.
const replicas = (): number => Math.max(1, Number(process.env["WK_REPLICAS"] ?? 1) || 1)

const bucket = (nc: NatsConnection, operation: string): Effect.Effect<ObjectStore, PluginStoreError> =>
  Effect.tryPromise({ try: () => new Objm(nc).create(PluginBucket, { replicas: replicas() }), catch: (cause) => new PluginStoreError({ operation, detail: `cannot open bucket ${PluginBucket}`, cause }) })

/** Stores wasm bytes (and their signed manifest) under their digest; returns the digest. Idempotent. */
export const publishPlugin = (nc: NatsConnection, bytes: Uint8Array, manifest?: SignedManifest): Effect.Effect<string, PluginStoreError> =>
  Effect.gen(function* () {
    const sha256 = sha256Hex(bytes)
    const os = yield* bucket(nc, "publish")
    yield* Effect.tryPromise({ try: () => os.putBlob({ name: `wasm/${sha256}` }, bytes), catch: (cause) => new PluginStoreError({ operation: "publish", detail: `cannot store wasm/${sha256}`, cause }) })
    if (manifest !== undefined) {
      const text = new TextEncoder().encode(JSON.stringify(manifest))
      yield* Effect.tryPromise({ try: () => os.putBlob({ name: `manifest/${sha256}` }, text), catch: (cause) => new PluginStoreError({ operation: "publish", detail: `cannot store manifest/${sha256}`, cause }) })
    }
    return sha256
  })

/** The wasm stored under a digest, or null. Bytes that do not hash to the digest are refused. */
export const loadPluginBytes = (nc: NatsConnection, sha256: string): Effect.Effect<Uint8Array | null, PluginStoreError> =>
  Effect.gen(function* () {
    const os = yield* bucket(nc, "load")
    const bytes = yield* Effect.tryPromise({ try: () => os.getBlob(`wasm/${sha256}`), catch: (cause) => new PluginStoreError({ operation: "load", detail: `cannot read wasm/${sha256}`, cause }) })
    if (bytes === null) return null
    if (sha256Hex(bytes) !== sha256) return yield* Effect.fail(new PluginStoreError({ operation: "load", detail: `wasm/${sha256} holds bytes with digest ${sha256Hex(bytes)}` }))
    return bytes
  })

/** The signed manifest stored beside a digest, or null. */
export const loadPluginManifest = (nc: NatsConnection, sha256: string): Effect.Effect<SignedManifest | null, PluginStoreError> =>
  Effect.gen(function* () {
    const os = yield* bucket(nc, "load")
    const raw = yield* Effect.tryPromise({ try: () => os.getBlob(`manifest/${sha256}`), catch: (cause) => new PluginStoreError({ operation: "load", detail: `cannot read manifest/${sha256}`, cause }) })
    if (raw === null) return null
    const m = Schema.decodeUnknownEither(Schema.parseJson(SignedManifest))(new TextDecoder().decode(raw))
    return Either.isRight(m) ? m.right : null
  })

/** A PluginSource over the object store. The host still checks digest and signature itself. */
export const layerPluginSourceObjectStore = (nc: NatsConnection) =>
  Layer.succeed(PluginSource, {
    fetch: (sha256) =>
      Effect.gen(function* () {
        const bytes = yield* loadPluginBytes(nc, sha256)
        if (bytes === null) return yield* Effect.fail(new PluginSourceError({ sha256, detail: `no wasm/${sha256} in bucket ${PluginBucket}` }))
        const manifest = yield* loadPluginManifest(nc, sha256)
        return { bytes, manifest: manifest ?? undefined }
      }).pipe(Effect.catchTag("PluginStoreError", (e) => Effect.fail(new PluginSourceError({ sha256, detail: e.detail }))))
  })
