import { Context, Effect, Layer } from "effect"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream"
import { Kvm, type KV } from "@nats-io/kv"
import { LedgerError } from "./LedgerError.js"
import { inboxPrefixOf } from "../schema/Subjects.js"

/** Where and as whom to connect. */
export interface NatsOptions {
  /** `host:port`, or several (a cluster): the client tries them and learns the rest from the cluster. */
  readonly servers: string | Array<string>
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

/**
 * Parses `nats://user:pass@host:port` into options (credentials in the URL are optional), or a
 * comma-separated list of such entries for a cluster
 * (`nats://kernel:kernel-dev@127.0.0.1:4301,127.0.0.1:4302,nats://127.0.0.1:4303`): the
 * credentials are the first entry's that has them, and `servers` is then the list of `host:port`.
 * A single entry gives `servers` as a string, as before. Throws on an entry that is not a URL.
 */
export const natsOptionsFromUrl = (url: string, fallback: { user?: string; pass?: string } = {}): NatsOptions => {
  const entries = url.split(",").map((e) => e.trim()).filter((e) => e !== "")
  if (entries.length === 0) throw new Error(`NATS URL is empty: expected nats://user:pass@host:port (several separated by commas)`)
  const parsed = entries.map((entry) => {
    let u: URL
    try {
      u = new URL(entry.includes("://") ? entry : `nats://${entry}`)
    } catch {
      throw new Error(`NATS URL entry "${entry}" is not a URL: expected nats://user:pass@host:port (several separated by commas)`)
    }
    if (u.hostname === "") throw new Error(`NATS URL entry "${entry}" has no host: expected nats://user:pass@host:port`)
    return u
  })
  const withUser = parsed.find((u) => u.username !== "")
  const user = withUser ? decodeURIComponent(withUser.username) : fallback.user
  const pass = withUser?.password ? decodeURIComponent(withUser.password) : fallback.pass
  const hostPorts = parsed.map((u) => `${u.hostname}:${u.port || "4222"}`)
  const servers = hostPorts.length === 1 ? hostPorts[0]! : hostPorts
  return { servers, ...(user ? { user } : {}), ...(pass ? { pass } : {}) }
}

/** Connects, and drains the connection when the scope closes. */
export const makeNats = (opts: NatsOptions) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const inboxPrefix = inboxPrefixOf(opts.user)
        const nc = await connect({ servers: opts.servers, user: opts.user, pass: opts.pass, name: opts.name ?? "wk-kernel", maxReconnectAttempts: -1, noAsyncTraces: true, ...(inboxPrefix ? { inboxPrefix } : {}) })
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
