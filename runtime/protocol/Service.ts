import { Cause, Effect } from "effect"
import { trace, type Context as TraceContext, type Span } from "@opentelemetry/api"
import { contextOfHeaders, rememberCallTrace, SpanKind, tracingEnabled, withSpan } from "../observability/Tracing.js"
import { log } from "../observability/Log.js"
import { kernelMetrics } from "../observability/KernelMetrics.js"
import type { Subscription } from "@nats-io/transport-node"
import { Nats } from "../ledger/Nats.js"
import type { LedgerPorts } from "../ledger/LedgerPorts.js"
import type { HeldCallStore } from "../ledger/HeldCallStore.js"
import type { PolicyStore } from "../policy/PolicyStore.js"
import type { Driver } from "../loops/Driver.js"
import type { HeldCalls } from "../loops/HeldCalls.js"
import { AllowLatency } from "../loops/AllowLatency.js"
import type { HeldIds } from "./HeldIds.js"
import { Subjects } from "../schema/Subjects.js"
import { ack } from "./Ack.js"
import { attest } from "./Attest.js"
import { edit } from "./Edit.js"
import { extend } from "./Extend.js"
import { attestBatch } from "./AttestBatch.js"
import { cancel } from "./Cancel.js"
import { settle } from "./Settle.js"
import { get } from "./Get.js"
import { heldList } from "./HeldList.js"
import { policyApply } from "./PolicyApply.js"
import { propose } from "./Propose.js"
import { grants } from "./Grants.js"
import { standingGrant, standingList, standingRevoke } from "./Standing.js"
import { unavailable, type Reply } from "./Replies.js"
import type { Rejected } from "./Request.js"
import { RequestsInFlight, serveRequests } from "./internal/serveRequests.js"
import { KernelConfig, stopGraceMs } from "../KernelConfig.js"

type Deps = Nats | LedgerPorts | PolicyStore | Driver | HeldCalls | KernelConfig | HeldIds | AllowLatency
type Handler = (data: Uint8Array, reply?: string) => Effect.Effect<Reply, Rejected | { readonly _tag: "LedgerError"; readonly message: string }, Deps>

/** A proposal answered with the tool's result (an ALLOW) reports how long it took to AllowLatency. */
const timedAllow = (handler: Handler): Handler => (data) =>
  Effect.gen(function* () {
    const t0 = performance.now()
    const reply = yield* handler(data)
    if (reply.status === 200) yield* (yield* AllowLatency).record(performance.now() - t0)
    return reply
  })

/**
 * With tracing on, a request is a server span (`wk.propose`, `wk.attest`, ...) in the trace its
 * `traceparent` header names; a proposal's span becomes the trace of the call it creates.
 */
const traced = (subject: string, handler: Handler, data: Uint8Array, reply: string | undefined, parent: TraceContext) =>
  withSpan(`wk.${subject.slice(subject.lastIndexOf(".") + 1)}`, handler(data, reply), {
    kind: SpanKind.SERVER,
    parent,
    onSuccess: (span: Span, reply: Reply) => {
      span.setAttribute("wk.status", reply.status)
      const heldId = "held_id" in reply && typeof reply.held_id === "string" ? reply.held_id : undefined
      if (heldId === undefined) return
      span.setAttribute("wk.held_id", heldId)
      if ("outcome" in reply && typeof reply.outcome === "string") span.setAttribute("wk.outcome", reply.outcome)
      if (subject === Subjects.propose) rememberCallTrace(heldId, trace.setSpan(parent, span))
    }
  })

/** The answer to a request interrupted because the kernel is stopping: send it again (another kernel answers). */
const stopping = unavailable("the kernel is stopping; send the request again")

/**
 * Serves the protocol subjects over NATS request/reply. A rejected request gets its error
 * reply; an infrastructure failure gets 503 and nothing half-applied (appends are atomic).
 *
 * Stopping (the scope closing: SIGINT) takes no new request and answers every request taken.
 * One still running after `stopGraceMs` (a blocking wait) is interrupted and answered 503, to
 * be sent again; what it committed stands, and what it left undone is the recovery's, as after a
 * crash.
 */
export const serveProtocol = Effect.gen(function* () {
  const { nc } = yield* Nats
  const config = yield* KernelConfig
  const runtime = yield* Effect.runtime<Deps>()
  const inFlight = new RequestsInFlight()
  const routes: ReadonlyArray<readonly [string, Handler]> = [
    [Subjects.propose, timedAllow(propose)],
    [Subjects.get, get],
    [Subjects.heldList, heldList],
    [Subjects.attest, attest],
    [Subjects.edit, edit],
    [Subjects.extend, extend],
    [Subjects.attestBatch, attestBatch],
    [Subjects.settle, settle],
    [Subjects.cancel, cancel],
    [Subjects.ack, ack],
    [Subjects.policyApply, policyApply],
    [Subjects.grants, grants],
    [Subjects.standingGrant, standingGrant],
    [Subjects.standingRevoke, standingRevoke],
    [Subjects.standingList, standingList]
  ]
  const subs: Array<Subscription> = routes.map(([subject, handler]) =>
    serveRequests(
      nc,
      runtime,
      inFlight,
      subject,
      (msg) => (tracingEnabled() ? traced(subject, handler, msg.data, msg.reply, contextOfHeaders(msg.headers)) : handler(msg.data, msg.reply)).pipe(Effect.catchAll((e) => Effect.succeed(e._tag === "Rejected" ? e.reply : unavailable(`${e._tag}: ${e.message}`)))),
      (cause) => {
        if (Cause.isInterruptedOnly(cause)) return stopping
        kernelMetrics.defects.inc({ loop: "protocol" })
        log.error({ loop: "protocol", subject, err: Cause.pretty(cause) }, "request failed")
        return { status: 500, error: { code: "internal", message: "the kernel failed on this request; it was not applied" } }
      }
    )
  )
  yield* Effect.addFinalizer(() => inFlight.close(subs, stopGraceMs(config)))
})
