import { Context, Effect, FiberRef, Layer } from "effect"
import { trace } from "@opentelemetry/api"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { DeliverPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream"
import { WitnessClient } from "../client/Client.js"
import { contextOfTraceparent } from "../observability/TraceContext.js"
import { CurrentTrace } from "../observability/Tracing.js"
import { Streams, Subjects, inboxOptionOf } from "../schema/Subjects.js"

/** Where the gateway's NATS connection goes and as whom (it forwards envelopes others signed). */
export interface GatewayNats {
  readonly servers: string | Array<string>
  readonly user?: string
  readonly pass?: string
}

/** One stored event of a held call at its address: its commit's stream sequence and its index in the commit. */
export interface StoredEvent {
  readonly seq: number
  readonly index: number
  readonly event: unknown
}

export class GatewayNatsError {
  readonly _tag = "GatewayNatsError"
  /** `cause`: the NATS client's error, when there is one (the CLI says from it whether NATS was down or refused the login). */
  constructor(
    readonly message: string,
    readonly cause?: unknown
  ) {}
}

/**
 * The gateway's side of the wire: forwards bodies to protocol subjects and follows a call's
 * events for the inbox. It never signs: requests arrive signed.
 */
export class KernelLink extends Context.Tag("wk/gateway/KernelLink")<
  KernelLink,
  {
    /**
     * Sends a body to a subject and returns the kernel's reply, whatever its status, in the
     * request's trace: the fiber's `CurrentTrace` (the gateway's span of the HTTP request), else
     * `traceparent` (the HTTP request's W3C trace context).
     */
    readonly request: (subject: string, body: Uint8Array | object, traceparent?: string) => Effect.Effect<{ status: number } & Record<string, unknown>, GatewayNatsError>
    /** Every kernel's answer to `wk.v1.health` for `body` (those that answer within half a second). */
    readonly askKernels: (body: object) => Effect.Effect<ReadonlyArray<{ status: number } & Record<string, unknown>>, GatewayNatsError>
    /** Follows a call's events from the first one; `onEvent` runs per event until the returned stop is called. */
    readonly follow: (heldId: string, onEvent: (e: StoredEvent) => void) => Effect.Effect<() => void, GatewayNatsError>
    /** Whether the connection to NATS is up now (requests fail at once while it is not). */
    readonly connected: () => boolean
    /** Readiness: NATS connected and the events stream readable; each failing check with why. */
    readonly readiness: Effect.Effect<Record<string, string>>
  }
>() {}

// The client's signing key is never used: the gateway only relays envelopes signed elsewhere.
const unusedKey = new Uint8Array(64)

export const makeKernelLink = (opts: GatewayNats) =>
  Effect.gen(function* () {
    const nc = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () => connect({ servers: opts.servers, user: opts.user, pass: opts.pass, name: "wk-gateway", maxReconnectAttempts: -1, ...inboxOptionOf(opts.user) }),
        catch: (e) => new GatewayNatsError(`cannot connect to NATS at ${opts.servers}: ${String(e)}`, e)
      }),
      (c: NatsConnection) => Effect.promise(() => c.drain().catch(() => undefined))
    )
    let up = true
    // The connection's own status events: a request while NATS is gone is refused at once (503)
    // instead of waiting out its timeout. A plain loop that ends when the connection closes (the
    // scope's drain), not a fiber of the scope: interrupting a stream over this iterator waits for
    // a status event that may never come, and the gateway would not stop.
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === "disconnect" || s.type === "close") up = false
        else if (s.type === "reconnect") up = true
      }
    })().catch(() => undefined)
    const connected = () => up && !nc.isClosed()
    const down = () => new GatewayNatsError("NATS is not connected: the kernel cannot be reached")
    const client = WitnessClient.over(nc, { principal: "gateway", secretKey: unusedKey })
    const js = jetstream(nc)
    const request = (subject: string, body: Uint8Array | object, traceparent?: string) =>
      !connected() ? Effect.fail(down()) : Effect.flatMap(FiberRef.get(CurrentTrace), (current) => Effect.tryPromise({
        try: () => client.request<{ status: number } & Record<string, unknown>>(subject, body, undefined, trace.getSpanContext(current) !== undefined ? current : contextOfTraceparent(traceparent)),
        catch: (e) => new GatewayNatsError(`kernel did not answer on ${subject}: ${String(e)}`)
      }))
    const askKernels = (body: object) =>
      !connected() ? Effect.fail(down()) : Effect.tryPromise({
        try: async () => {
          const out: Array<{ status: number } & Record<string, unknown>> = []
          for await (const m of await nc.requestMany(Subjects.health, JSON.stringify(body), { maxWait: 500 })) out.push(m.json())
          return out
        },
        catch: (e) => new GatewayNatsError(`kernels did not answer on ${Subjects.health}: ${String(e)}`)
      })
    const follow = (heldId: string, onEvent: (e: StoredEvent) => void) =>
      Effect.tryPromise({
        try: async () => {
          // An ordered consumer: no state on the server beyond this reader, gone when it stops.
          const consumer = await js.consumers.get(Streams.events, { filter_subjects: Subjects.events(heldId), deliver_policy: DeliverPolicy.All })
          const messages = await consumer.consume()
          void (async () => {
            for await (const m of messages) {
              try {
                // Each message is a commit; its events go out one by one, undecoded (the listener decodes).
                const events = m.json<{ readonly events?: unknown }>().events
                if (Array.isArray(events)) events.forEach((event: unknown, index) => onEvent({ seq: m.seq, index, event }))
              } catch {
                // A listener that failed, or a body that is not JSON, is not the reader's problem; keep reading.
              }
            }
          })()
          return () => void messages.close().catch(() => undefined)
        },
        catch: (e) => new GatewayNatsError(`cannot follow events of ${heldId}: ${String(e)}`)
      })
    const readiness = Effect.promise(async (): Promise<Record<string, string>> => {
      if (!connected()) return { nats: "not connected to NATS", streams: "NATS is not connected" }
      const streams = await Promise.race([
        jetstreamManager(nc).then((jsm) => jsm.streams.info(Streams.events)).then(() => "ok"),
        new Promise<string>((resolve) => setTimeout(() => resolve("no answer within 1000 ms"), 1000).unref())
      ]).catch((e: unknown) => (e instanceof Error ? e.message : String(e)))
      return { nats: "ok", streams }
    })
    return KernelLink.of({ request, askKernels, follow, connected, readiness })
  })

export const layerKernelLink = (opts: GatewayNats) => Layer.scoped(KernelLink, makeKernelLink(opts))
