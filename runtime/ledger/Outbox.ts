import { Context, Effect, Layer } from "effect"
import { Subjects } from "../schema/Subjects.js"
import { LedgerError } from "./LedgerError.js"
import { Nats } from "./Nats.js"

/** What the kernel publishes besides its events: results to agents and notices to witnesses. */
export class Outbox extends Context.Tag("wk/Outbox")<
  Outbox,
  {
    /**
     * Publishes a final result to the session's results stream, durably; the same `messageId`
     * within the stream's duplicate window is stored once.
     */
    readonly deliver: (sessionId: string, body: unknown, messageId: string) => Effect.Effect<void, LedgerError>
    /** Tells witness routes a call waits for them: a notice, not durable (the held call is the truth). */
    readonly requestWitnesses: (heldId: string, body: unknown) => Effect.Effect<void>
  }
>() {}

const encoder = new TextEncoder()

/** Deliveries into `WK_SESSIONS`, witness notices on core NATS. */
export const layerNatsOutbox = Layer.effect(
  Outbox,
  Effect.map(Nats, ({ publish, nc }) =>
    Outbox.of({
      deliver: (sessionId, body, messageId) =>
        Effect.tryPromise({
          try: () => publish(Subjects.sessionResults(sessionId), encoder.encode(JSON.stringify(body)), { msgID: messageId }),
          catch: (cause) => new LedgerError({ operation: "publish delivery", message: String(cause), cause })
        }).pipe(Effect.asVoid),
      requestWitnesses: (heldId, body) => Effect.sync(() => nc.publish(Subjects.witnessRequests(heldId), JSON.stringify(body)))
    })
  )
)
