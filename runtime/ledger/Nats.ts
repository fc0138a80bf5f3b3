import { Context, Effect, Layer } from "effect"
import { connect, createInbox, headers as natsHeaders, type Msg, type MsgHdrs, type NatsConnection } from "@nats-io/transport-node"
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream"
import { Kvm, type KV } from "@nats-io/kv"
import { LedgerError } from "../schema/LedgerError.js"
import { inboxOptionOf } from "../schema/Subjects.js"
import { coalesceWrites } from "./CoalescedWrites.js"

/** Where and as whom to connect. */
export interface NatsOptions {
  /** `host:port`, or several (a cluster): the client tries them and learns the rest from the cluster. */
  readonly servers: string | Array<string>
  readonly user?: string
  readonly pass?: string
  readonly name?: string
}

/** A JetStream publish acknowledgement. */
export interface PubAck {
  readonly stream: string
  readonly seq: number
  readonly duplicate: boolean
}

/** A JetStream publish that was refused (`code`: the API error code, e.g. 10071) or not answered. */
export class PublishError extends Error {
  constructor(message: string, readonly code?: number) {
    super(message)
    this.name = "PublishError"
  }
}

export interface PublishOptions {
  /** `Nats-Msg-Id`: the stream stores one message per id within its duplicate window. */
  readonly msgID?: string
  /** `Nats-Expected-Last-Subject-Sequence`: stored only if the subject's last sequence is this. */
  readonly lastSubjectSequence?: number
}

/** A request nobody answered in time, the connection closed under it, or nobody serves the subject. */
export class RequestFailed extends Error {
  constructor(readonly reason: "timeout" | "closed" | "no_responders", timeoutMs: number) {
    super(reason === "timeout" ? `request timed out after ${timeoutMs} ms` : reason === "closed" ? "connection closed" : "503 no responders")
    this.name = "RequestFailed"
  }
}

export interface RequestOptions {
  readonly timeoutMs: number
  readonly headers?: MsgHdrs
}

/**
 * Request/reply over one wildcard reply subscription and one timeout sweep: the same wire
 * exchange as `nc.request`, without the per-request machinery of nats.js (a timer, a deferred,
 * and an `Error` built for every request, resolved or not: its `cancel` constructs one even
 * after a reply), which the kernel paid on every append, tool call and read of the hot path.
 */
const makeRequester = (nc: NatsConnection, inboxPrefix: string | undefined) => {
  // Under the connection's own inbox prefix: nats.conf lets a user listen only there.
  const prefix = `${createInbox(inboxPrefix)}.`
  interface Waiting {
    readonly resolve: (m: Msg) => void
    readonly reject: (e: unknown) => void
    readonly deadline: number
    readonly timeoutMs: number
  }
  const waiting = new Map<number, Waiting>()
  let next = 0
  nc.subscribe(`${prefix}*`, {
    callback: (err, msg) => {
      if (err !== null) return // the connection is closing: the sweep fails what is pending
      const id = Number(msg.subject.slice(prefix.length))
      const w = waiting.get(id)
      if (w === undefined) return
      waiting.delete(id)
      const h = msg.headers
      if (msg.data.length === 0 && h !== undefined && h.hasError && h.code === 503) return w.reject(new RequestFailed("no_responders", w.timeoutMs))
      w.resolve(msg)
    }
  })
  const sweep = setInterval(() => {
    if (waiting.size === 0) return
    const now = Date.now()
    const closed = nc.isClosed()
    for (const [id, w] of waiting) {
      if (closed || w.deadline <= now) {
        waiting.delete(id)
        w.reject(new RequestFailed(closed ? "closed" : "timeout", w.timeoutMs))
      }
    }
  }, 25)
  sweep.unref()
  return (subject: string, data: Uint8Array, opts: RequestOptions): Promise<Msg> =>
    new Promise<Msg>((resolve, reject) => {
      const id = ++next
      waiting.set(id, { resolve, reject, deadline: Date.now() + opts.timeoutMs, timeoutMs: opts.timeoutMs })
      try {
        nc.publish(subject, data, { reply: prefix + id, ...(opts.headers !== undefined ? { headers: opts.headers } : {}) })
      } catch (e) {
        waiting.delete(id)
        reject(e)
      }
    })
}

/** JetStream publish awaiting its ack (`js.publish`'s exchange: headers, PubAck or API error) over the lean requester. */
const makePublisher = (request: ReturnType<typeof makeRequester>, timeoutMs: number) => {
  const decoder = new TextDecoder()
  return async (subject: string, data: Uint8Array, opts: PublishOptions = {}): Promise<PubAck> => {
    const h = natsHeaders()
    if (opts.msgID !== undefined) h.set("Nats-Msg-Id", opts.msgID)
    if (opts.lastSubjectSequence !== undefined) h.set("Nats-Expected-Last-Subject-Sequence", String(opts.lastSubjectSequence))
    let msg: Msg
    try {
      msg = await request(subject, data, { timeoutMs, headers: h })
    } catch (e) {
      if (e instanceof RequestFailed) {
        throw new PublishError(e.reason === "no_responders" ? "no responders: JetStream is not available for this subject" : e.reason === "closed" ? "connection closed" : `JetStream publish timed out after ${timeoutMs} ms`)
      }
      throw e
    }
    if (msg.data.length === 0 && msg.headers?.hasError) throw new PublishError(`JetStream publish failed: ${msg.headers.status}`)
    const r = JSON.parse(decoder.decode(msg.data)) as { stream?: string; seq?: number; duplicate?: boolean; error?: { code?: number; err_code?: number; description?: string } }
    if (r.error !== undefined) throw new PublishError(r.error.description ?? `JetStream error ${r.error.code}`, r.error.err_code)
    if (typeof r.stream !== "string" || r.stream === "" || typeof r.seq !== "number") throw new PublishError("invalid ack response")
    return { stream: r.stream, seq: r.seq, duplicate: r.duplicate === true }
  }
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
    /** JetStream publish awaiting the ack (see `makePublisher`); rejects with `PublishError`. */
    readonly publish: (subject: string, data: Uint8Array, opts?: PublishOptions) => Promise<PubAck>
    /** Request/reply (see `makeRequester`); rejects with `RequestFailed`. */
    readonly request: (subject: string, data: Uint8Array, opts: RequestOptions) => Promise<Msg>
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
        const inbox = inboxOptionOf(opts.user)
        const nc = await connect({ servers: opts.servers, user: opts.user, pass: opts.pass, name: opts.name ?? "wk-kernel", maxReconnectAttempts: -1, noAsyncTraces: true, ...inbox })
        coalesceWrites(nc)
        // A server without JetStream refuses here: close the connection, or it keeps the process alive.
        const jsm = await jetstreamManager(nc).catch(async (e: unknown) => {
          await nc.close().catch(() => undefined)
          throw e
        })
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
        const request = makeRequester(nc, inbox.inboxPrefix)
        return { nc, js: jetstream(nc), jsm, kvm, kv, request, publish: makePublisher(request, 5_000) }
      },
      catch: (cause) => new LedgerError({ operation: "connect", message: `cannot connect to NATS at ${opts.servers}: ${String(cause)}`, cause })
    }),
    ({ nc }) => Effect.promise(() => nc.drain().catch(() => undefined))
  )

export const layerNats = (opts: NatsOptions) => Layer.scoped(Nats, makeNats(opts))
