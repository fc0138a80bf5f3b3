import { Context, Effect, FiberRef, Layer, Schema } from "effect"
import { Nats, RequestFailed } from "./Nats.js"
import { JsonValue } from "../schema/Json.js"
import { Subjects } from "../schema/Subjects.js"
import { CurrentTrace, headersOfContext, SpanKind, tracingEnabled, withSpan } from "../observability/Tracing.js"

/** A tool's answer to an invoke, as protocol.md fixes it. */
export const InvokeReply = Schema.Union(
  Schema.Struct({ ok: Schema.Literal(true), result: JsonValue }),
  Schema.Struct({ ok: Schema.Literal(false), error: Schema.String })
)
export type InvokeReply = typeof InvokeReply.Type

export const ReadbackReply = Schema.Union(
  Schema.Struct({ applied: Schema.Literal(true), result: JsonValue }),
  Schema.Struct({ applied: Schema.Literal(false) })
)
export type ReadbackReply = typeof ReadbackReply.Type

/** The tool did not answer in time, or answered with something that is not protocol: outcome unknown. */
export class ToolUnanswered extends Schema.TaggedError<ToolUnanswered>()("ToolUnanswered", {
  tool: Schema.String,
  reason: Schema.String
}) {}

/** Nobody serves this subject: the request reached no one (the tool service is down or absent). */
export class NoResponders extends Schema.TaggedError<NoResponders>()("NoResponders", { tool: Schema.String }) {}

/** An invoke as a tool receives it. */
export interface ToolInvoke {
  readonly tool: string
  readonly heldId: string
  readonly idempotencyKey: string
  readonly args: unknown
}

/** The kernel's requests to tool services. */
export class ToolClient extends Context.Tag("wk/ToolClient")<
  ToolClient,
  {
    /** `wk.v1.tools.<tool>.invoke` with the idempotency key. */
    readonly invoke: (request: ToolInvoke, timeoutMs: number) => Effect.Effect<InvokeReply, ToolUnanswered | NoResponders>
    /** `wk.v1.tools.<tool>.readback`: did the effect under this key happen? */
    readonly readback: (tool: string, idempotencyKey: string, timeoutMs: number) => Effect.Effect<ReadbackReply, ToolUnanswered | NoResponders>
  }
>() {}

const encoder = new TextEncoder()

/** Tool requests over NATS request/reply; replies are decoded against the protocol's schemas. */
export const layerNatsToolClient = Layer.effect(
  ToolClient,
  Effect.map(Nats, (nats) => {
    // Traced, the request is a client span whose `traceparent` header the tool service may continue.
    const send = (subject: string, data: Uint8Array, timeoutMs: number) =>
      !tracingEnabled()
        ? Effect.tryPromise(() => nats.request(subject, data, { timeoutMs }))
        : withSpan(
            `wk.tool ${subject.slice(subject.lastIndexOf(".") + 1)}`,
            Effect.flatMap(FiberRef.get(CurrentTrace), (ctx) => {
              const headers = headersOfContext(ctx)
              return Effect.tryPromise(() => nats.request(subject, data, { timeoutMs, ...(headers !== undefined ? { headers } : {}) }))
            }),
            { kind: SpanKind.CLIENT, attributes: { "messaging.destination.name": subject } }
          )
    const request = <A, I>(schema: Schema.Schema<A, I>, subject: string, tool: string, body: unknown, timeoutMs: number) =>
      send(subject, encoder.encode(JSON.stringify(body)), timeoutMs).pipe(
        Effect.mapError(({ error: cause }) => (cause instanceof RequestFailed && cause.reason === "no_responders" ? new NoResponders({ tool }) : new ToolUnanswered({ tool, reason: String(cause) }))),
        Effect.flatMap((msg) =>
          Schema.decodeUnknown(schema)(msg.json()).pipe(Effect.mapError((e) => new ToolUnanswered({ tool, reason: `reply is not protocol: ${e.message}` })))
        )
      )
    return ToolClient.of({
      invoke: ({ tool, heldId, idempotencyKey, args }, timeoutMs) =>
        request(InvokeReply, Subjects.toolInvoke(tool), tool, { held_id: heldId, idempotency_key: idempotencyKey, tool, args }, timeoutMs),
      readback: (tool, idempotencyKey, timeoutMs) => request(ReadbackReply, Subjects.toolReadback(tool), tool, { idempotency_key: idempotencyKey }, timeoutMs)
    })
  })
)
