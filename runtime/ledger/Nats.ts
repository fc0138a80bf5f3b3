import { Context, Effect, Layer } from "effect"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream"
import { Kvm, type KV } from "@nats-io/kv"
import { LedgerError } from "./LedgerError.js"

/** Where and as whom to connect. */
export interface NatsOptions {
  readonly servers: string
  readonly user?: string
  readonly pass?: string
  readonly name?: string
}

/** One NATS connection with its JetStream and KV handles. */
export class Nats extends Context.Tag("wk/Nats")<
  Nats,
  {
    readonly nc: NatsConnection
    readonly js: JetStreamClient
    readonly jsm: JetStreamManager
    readonly kvm: Kvm
    /** An opened KV bucket, opened once per connection. */
    readonly kv: (bucket: string) => Promise<KV>
  }
>() {}

/** Parses `nats://user:pass@host:port` into options (credentials in the URL are optional). */
export const natsOptionsFromUrl = (url: string, fallback: { user?: string; pass?: string } = {}): NatsOptions => {
  const u = new URL(url.includes("://") ? url : `nats://${url}`)
  const user = u.username ? decodeURIComponent(u.username) : fallback.user
  const pass = u.password ? decodeURIComponent(u.password) : fallback.pass
  return { servers: `${u.hostname}:${u.port || "4222"}`, ...(user ? { user } : {}), ...(pass ? { pass } : {}) }
}

/** Connects, and drains the connection when the scope closes. */
export const makeNats = (opts: NatsOptions) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const nc = await connect({ servers: opts.servers, user: opts.user, pass: opts.pass, name: opts.name ?? "wk-kernel", maxReconnectAttempts: -1, noAsyncTraces: true })
        const jsm = await jetstreamManager(nc)
        const kvm = new Kvm(nc)
        const opened = new Map<string, Promise<KV>>()
        const kv = (bucket: string): Promise<KV> => {
          let p = opened.get(bucket)
          if (p === undefined) {
            p = kvm.open(bucket)
            p.catch(() => opened.delete(bucket))
            opened.set(bucket, p)
          }
          return p
        }
        return { nc, js: jetstream(nc), jsm, kvm, kv }
      },
      catch: (cause) => new LedgerError({ operation: "connect", message: `cannot connect to NATS at ${opts.servers}: ${String(cause)}`, cause })
    }),
    ({ nc }) => Effect.promise(() => nc.drain().catch(() => undefined))
  )

export const layerNats = (opts: NatsOptions) => Layer.scoped(Nats, makeNats(opts))
