import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager, type ConsumerMessages, type JsMsg } from "@nats-io/jetstream"
import { nanos, type NatsConnection } from "@nats-io/transport-node"
import { Streams, Subjects } from "../schema/Subjects.js"
import type { RouteConfig } from "./RouteConfig.js"
import { sendThrough, type RoutedRequest, type Sent } from "./Senders.js"

/** What a route records of one delivery attempt (on `wk.v1.witness.deliveries.<route>.<held_id>`, kept in `WK_WITNESS`). */
export interface DeliveryRecord {
  readonly route: string
  readonly held_id: string
  readonly generation: number
  readonly reminder: boolean
  readonly attempt: number
  readonly status: "delivered" | "failed" | "skipped"
  readonly error?: string
  /** A signed answer the receiver gave, relayed to the kernel: its disposition. */
  readonly answer?: string
  readonly at: string
}

/** The durable consumer of a route (one per route name, shared by its runners). */
export const routeConsumer = (route: string) => `route_${route}`

/** Backoff before the `attempt`+1-th delivery: `base` doubling, at most `max`. */
export const routeBackoffMs = (attempt: number, retry: RouteConfig["retry"]): number => Math.min(retry.max_ms, retry.base_ms * 2 ** Math.max(0, Math.min(20, attempt - 1)))

/**
 * Witness routes as durable work: each route has its own durable consumer on the witness
 * requests kept in `WK_WITNESS`, created on the route's first start with deliver policy "all" (so
 * a request made while the route is down, or before it ever ran, is delivered when it comes), delivers each request (and each reminder) through its sender, records every
 * attempt, acks on success and retries a failure with backoff; a request for a call that is no
 * longer open is skipped. A webhook may answer with a signed attestation, which is relayed to the
 * kernel like any witness's (the route holds no key: it cannot approve anything itself).
 */
export class RouteRunner {
  private readonly running: Array<ConsumerMessages> = []

  constructor(private readonly nc: NatsConnection, private readonly config: RouteConfig, private readonly onRecord?: (r: DeliveryRecord) => void) {}

  async start(): Promise<this> {
    const jsm = await jetstreamManager(this.nc)
    const js = jetstream(this.nc)
    for (const [name, route] of Object.entries(this.config.routes)) {
      const durable = routeConsumer(name)
      const exists = await jsm.consumers.info(Streams.witness, durable).then(() => true, () => false)
      if (!exists) {
        await jsm.consumers.add(Streams.witness, { durable_name: durable, filter_subject: Subjects.witnessRequests("*"), ack_policy: AckPolicy.Explicit, ack_wait: nanos(60_000), deliver_policy: DeliverPolicy.All })
      }
      const messages = await (await js.consumers.get(Streams.witness, durable)).consume({ max_messages: 8 })
      this.running.push(messages)
      const send = sendThrough(route, this.config.gateway_url)
      void (async () => {
        for await (const m of messages) await this.handle(name, m, send)
      })()
    }
    return this
  }

  private async handle(name: string, m: JsMsg, send: (r: RoutedRequest) => Promise<Sent>): Promise<void> {
    let r: RoutedRequest
    try {
      r = m.json<RoutedRequest>()
    } catch {
      return m.term()
    }
    const base = { route: name, held_id: r.held_id, generation: r.generation, reminder: r.reminder === true, attempt: m.info.deliveryCount }
    const record = (rec: Omit<DeliveryRecord, keyof typeof base | "at">) => {
      const full: DeliveryRecord = { ...base, ...rec, at: new Date().toISOString() }
      this.nc.publish(Subjects.routeDelivery(name, r.held_id), JSON.stringify(full))
      this.onRecord?.(full)
    }
    const open = await this.nc.request(Subjects.get, JSON.stringify({ held_id: r.held_id }), { timeout: 5_000 }).then(
      (reply) => reply.json<{ held?: { lifecycle?: string; generation?: number } }>().held,
      () => undefined
    )
    if (open !== undefined && (open.lifecycle !== "open" || open.generation !== r.generation)) {
      record({ status: "skipped", error: open.lifecycle !== "open" ? `the call is ${open.lifecycle}` : `the call is at generation ${open.generation}` })
      return m.ack()
    }
    try {
      const sent = await send(r)
      let answer: string | undefined
      if (sent.answer !== undefined) {
        const reply = await this.nc.request(Subjects.attest, JSON.stringify(sent.answer), { timeout: 5_000 }).then((x) => x.json<{ disposition?: string; status?: number }>(), (e: unknown): { disposition?: string; status?: number } => ({ disposition: `not relayed: ${String(e)}` }))
        answer = reply.disposition ?? String(reply.status)
      }
      record({ status: "delivered", ...(answer !== undefined ? { answer } : {}) })
      m.ack()
    } catch (e) {
      record({ status: "failed", error: e instanceof Error ? e.message : String(e) })
      m.nak(routeBackoffMs(m.info.deliveryCount, this.config.retry))
    }
  }

  async stop(): Promise<void> {
    await Promise.all(this.running.map((m) => m.close().catch(() => undefined)))
  }
}
