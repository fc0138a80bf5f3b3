import { Context, Effect, FiberRef, Layer, Schema } from "effect"
import { errors, headers as natsHeaders, type Msg, type MsgHdrs } from "@nats-io/transport-node"
import { Nats, RequestFailed } from "./Nats.js"
import { JsonValue } from "../schema/Json.js"
import { Subjects } from "../schema/Subjects.js"
import { toolReplySigned } from "../schema/ToolReplySignature.js"
import { kernelMetrics } from "../observability/KernelMetrics.js"
import { log } from "../observability/Log.js"
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
  /**
   * The keys of the tool's registered service identity (principals of class `tool:<tool>`).
   * Non-empty: only a reply signed by one of them is accepted; any other reply is refused,
   * counted, and the kernel waits on for the service's own. Empty: the tool's NATS user is its
   * only identity.
   */
  readonly serviceKeys?: ReadonlyArray<string>
}

/** The kernel's requests to tool services. */
export class ToolClient extends Context.Tag("wk/ToolClient")<
  ToolClient,
  {
    /** `wk.v1.tools.<tool>.invoke` with the idempotency key. */
    readonly invoke: (request: ToolInvoke, timeoutMs: number) => Effect.Effect<InvokeReply, ToolUnanswered | NoResponders>
    /** `wk.v1.tools.<tool>.readback`: did the effect under this key happen? */
    readonly readback: (tool: string, idempotencyKey: string, timeoutMs: number, serviceKeys?: ReadonlyArray<string>) => Effect.Effect<ReadbackReply, ToolUnanswered | NoResponders>
  }
>() {}

const encoder = new TextEncoder()

/** What a signed exchange checks a reply against: the operation, tool and key it was signed for, and the registered keys. */
interface ReplyCheck {
  readonly op: "invoke" | "readback"
  readonly tool: string
  readonly idempotencyKey: string
  readonly keys: ReadonlyArray<string>
}

const parsed = (m: Msg): unknown => {
  try {
    return m.json()
  } catch {
    return undefined
  }
}

/** Tool requests over NATS request/reply; replies are decoded against the protocol's schemas. */
export const layerNatsToolClient = Layer.effect(
  ToolClient,
  Effect.map(Nats, (nats) => {
    /**
     * The first reply signed by the tool's registered service within `timeoutMs`. Every other
     * reply (another connection of the tool's NATS user, a replayed signature) is refused and
     * counted; none signed in time is a lost reply (outcome unknown).
     */
    const signedRequest = async (subject: string, data: Uint8Array, timeoutMs: number, check: ReplyCheck, headers: MsgHdrs | undefined): Promise<Msg> => {
      let refused = 0
      try {
        for await (const m of await nats.nc.requestMany(subject, data, { maxWait: timeoutMs, strategy: "timer", ...(headers !== undefined ? { headers } : {}) })) {
          if (toolReplySigned(check.op, check.tool, check.idempotencyKey, parsed(m), check.keys)) return m
          refused++
          kernelMetrics.toolRepliesRefused.inc({ tool: check.tool })
          log.warn({ loop: "executor", tool: check.tool, idempotency_key: check.idempotencyKey }, "tool reply refused: not signed by the tool's registered service")
        }
      } catch (e) {
        if (e instanceof errors.NoRespondersError) throw new RequestFailed("no_responders", timeoutMs)
        throw e
      }
      throw new Error(`no reply signed by the tool's registered service within ${timeoutMs} ms${refused > 0 ? ` (${refused} refused)` : ""}`)
    }
    const exchange = (subject: string, data: Uint8Array, timeoutMs: number, check: ReplyCheck | undefined, headers?: MsgHdrs) =>
      check === undefined ? nats.request(subject, data, { timeoutMs, ...(headers !== undefined ? { headers } : {}) }) : signedRequest(subject, data, timeoutMs, check, headers)
    // Traced, the request is a client span whose `traceparent` header the tool service may continue.
    const send = (subject: string, data: Uint8Array, timeoutMs: number, check: ReplyCheck | undefined) =>
      !tracingEnabled()
        ? Effect.tryPromise(() => exchange(subject, data, timeoutMs, check))
        : withSpan(
            `wk.tool ${subject.slice(subject.lastIndexOf(".") + 1)}`,
            Effect.flatMap(FiberRef.get(CurrentTrace), (ctx) => Effect.tryPromise(() => exchange(subject, data, timeoutMs, check, headersOfContext(ctx, natsHeaders)))),
            { kind: SpanKind.CLIENT, attributes: { "messaging.destination.name": subject } }
          )
    const request = <A, I>(schema: Schema.Schema<A, I>, subject: string, tool: string, body: unknown, timeoutMs: number, check: ReplyCheck | undefined) =>
      send(subject, encoder.encode(JSON.stringify(body)), timeoutMs, check).pipe(
        Effect.mapError(({ error: cause }) => (cause instanceof RequestFailed && cause.reason === "no_responders" ? new NoResponders({ tool }) : new ToolUnanswered({ tool, reason: String(cause) }))),
        Effect.flatMap((msg) =>
          Schema.decodeUnknown(schema)(msg.json()).pipe(Effect.mapError((e) => new ToolUnanswered({ tool, reason: `reply is not protocol: ${e.message}` })))
        )
      )
    return ToolClient.of({
      invoke: ({ tool, heldId, idempotencyKey, args, serviceKeys }, timeoutMs) =>
        request(InvokeReply, Subjects.toolInvoke(tool), tool, { held_id: heldId, idempotency_key: idempotencyKey, tool, args }, timeoutMs, serviceKeys !== undefined && serviceKeys.length > 0 ? { op: "invoke", tool, idempotencyKey, keys: serviceKeys } : undefined),
      readback: (tool, idempotencyKey, timeoutMs, serviceKeys) =>
        request(ReadbackReply, Subjects.toolReadback(tool), tool, { idempotency_key: idempotencyKey }, timeoutMs, serviceKeys !== undefined && serviceKeys.length > 0 ? { op: "readback", tool, idempotencyKey, keys: serviceKeys } : undefined)
    })
  })
)
