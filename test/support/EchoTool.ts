import type { NatsConnection, Subscription } from "@nats-io/transport-node"
import { Subjects } from "../../runtime/schema/Subjects.js"

/** A tool service for tests: applies each idempotency key once, counts invocations, answers read-back. */
export class EchoTool {
  readonly applied = new Map<string, unknown>()
  readonly invocations = new Map<string, number>()
  private subs: Array<Subscription> = []

  constructor(readonly tools: ReadonlyArray<string>, private readonly readback = true) {}

  get effects(): number {
    return this.applied.size
  }

  /** Serves each tool on `nc`, or on the connection (the tool service identity) `nc(tool)` names. */
  serve(nc: NatsConnection | ((tool: string) => NatsConnection)): this {
    const enc = new TextEncoder()
    for (const tool of this.tools) {
      const conn = typeof nc === "function" ? nc(tool) : nc
      this.subs.push(
        conn.subscribe(Subjects.toolInvoke(tool), {
          callback: (_e, m) => {
            const req = m.json<{ idempotency_key: string; args: unknown }>()
            this.invocations.set(req.idempotency_key, (this.invocations.get(req.idempotency_key) ?? 0) + 1)
            if (!this.applied.has(req.idempotency_key)) this.applied.set(req.idempotency_key, { tool, args: req.args })
            m.respond(enc.encode(JSON.stringify({ ok: true, result: this.applied.get(req.idempotency_key) })))
          }
        })
      )
      if (this.readback) {
        this.subs.push(
          conn.subscribe(Subjects.toolReadback(tool), {
            callback: (_e, m) => {
              const key = m.json<{ idempotency_key: string }>().idempotency_key
              const r = this.applied.get(key)
              m.respond(enc.encode(JSON.stringify(r === undefined ? { applied: false } : { applied: true, result: r })))
            }
          })
        )
      }
    }
    return this
  }

  stop(): void {
    this.subs.forEach((s) => s.unsubscribe())
  }
}
