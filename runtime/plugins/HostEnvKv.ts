// Plugin host data from a NATS KV bucket: `kv` host-function reads are KV gets (the host has
// already checked the key against the pin's prefix). Counters come from the kernel;
// `publish` is the kernel connection's plain NATS publish.
import { Effect, Layer } from "effect"
import { PluginHostEnv } from "./HostEnv.js"

/** What host data is read from: a KV bucket's reads (ledger's NATS KV has this shape). */
export interface HostDataReader {
  readonly get: (key: string) => Promise<{ readonly operation: string; readonly string: () => string } | null>
}

/** Host data over a KV bucket; a read that fails or finds a delete marker reads as absent. */
export const layerHostEnvKv = (
  kv: HostDataReader,
  counter: (name: string, principal: string) => Effect.Effect<number> = () => Effect.succeed(0),
  publish: (subject: string, data: string) => Effect.Effect<void> = () => Effect.void
) =>
  Layer.succeed(PluginHostEnv, {
    kvGet: (key) =>
      Effect.tryPromise(() => kv.get(key)).pipe(
        Effect.map((e) => (e === null || e.operation !== "PUT" ? null : e.string())),
        Effect.orElseSucceed(() => null)
      ),
    counter,
    publish
  })
