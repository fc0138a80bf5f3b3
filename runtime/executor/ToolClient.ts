import { type Context, Effect, Schema } from "effect"
import { Nats, RequestFailed } from "../ledger/Nats.js"
import { JsonValue } from "../schema/Json.js"
import { Subjects } from "../schema/Subjects.js"

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

const encoder = new TextEncoder()

const request = <A, I>(schema: Schema.Schema<A, I>, subject: string, tool: string, body: unknown, timeoutMs: number) =>
  Effect.gen(function* () {
    const nats = yield* Nats
    const msg = yield* Effect.tryPromise({
      try: () => nats.request(subject, encoder.encode(JSON.stringify(body)), { timeoutMs }),
      catch: (cause) => (cause instanceof RequestFailed && cause.reason === "no_responders" ? new NoResponders({ tool }) : new ToolUnanswered({ tool, reason: String(cause) }))
    })
    return yield* Schema.decodeUnknown(schema)(msg.json()).pipe(
      Effect.mapError((e) => new ToolUnanswered({ tool, reason: `reply is not protocol: ${e.message}` }))
    )
  })

/** How an invoke ended: the tool's reply, nobody serving the subject, or no protocol answer (outcome unknown). */
export type InvokeOutcome =
  | { readonly _tag: "Replied"; readonly reply: InvokeReply }
  | { readonly _tag: "NoResponders" }
  | { readonly _tag: "Unanswered"; readonly reason: string }

const decodeInvokeReply = Schema.decodeUnknownEither(InvokeReply)

/**
 * `wk.v1.tools.<tool>.invoke` with the idempotency key, as one promise on a given connection
 * (the hot path of every call: no fiber steps inside). Never rejects: every ending is an outcome.
 */
export const invokeToolWith = async (nats: Context.Tag.Service<typeof Nats>, tool: string, heldId: string, idempotencyKey: string, args: unknown, timeoutMs: number): Promise<InvokeOutcome> => {
  let msg
  try {
    msg = await nats.request(Subjects.toolInvoke(tool), encoder.encode(JSON.stringify({ held_id: heldId, idempotency_key: idempotencyKey, tool, args })), { timeoutMs })
  } catch (cause) {
    return cause instanceof RequestFailed && cause.reason === "no_responders" ? { _tag: "NoResponders" } : { _tag: "Unanswered", reason: String(cause) }
  }
  let body: unknown
  try {
    body = msg.json()
  } catch (cause) {
    return { _tag: "Unanswered", reason: `reply is not protocol: ${String(cause)}` }
  }
  const reply = decodeInvokeReply(body)
  return reply._tag === "Right" ? { _tag: "Replied", reply: reply.right } : { _tag: "Unanswered", reason: `reply is not protocol: ${reply.left.message}` }
}

/** `wk.v1.tools.<tool>.readback`: did the effect under this key happen? */
export const readbackTool = (tool: string, idempotencyKey: string, timeoutMs: number) =>
  request(ReadbackReply, Subjects.toolReadback(tool), tool, { idempotency_key: idempotencyKey }, timeoutMs)
