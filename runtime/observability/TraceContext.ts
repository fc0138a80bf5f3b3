import { ROOT_CONTEXT, trace, type Context as TraceContext } from "@opentelemetry/api"
import { W3CTraceContextPropagator } from "@opentelemetry/core"
import { headers as natsHeaders, type MsgHdrs } from "@nats-io/transport-node"

/**
 * W3C trace context (`traceparent`, `tracestate`) on NATS headers and in plain strings: how
 * agents, the gateway, the kernel and tool services hand a trace on. No SDK: clients load this.
 */
const propagator = new W3CTraceContextPropagator()

const getter = {
  keys: (h: MsgHdrs) => h.keys(),
  get: (h: MsgHdrs, key: string) => (h.has(key) ? h.get(key) : undefined)
}
const setter = { set: (h: MsgHdrs, key: string, value: string) => h.set(key, value) }

/** The trace context a message's headers carry (`traceparent`, `tracestate`), or the root. */
export const contextOfHeaders = (h: MsgHdrs | undefined): TraceContext => (h === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, h, getter))

/** `traceparent` (and `tracestate`) for `ctx` as NATS headers; undefined when `ctx` holds no span. */
export const headersOfContext = (ctx: TraceContext): MsgHdrs | undefined => {
  if (trace.getSpanContext(ctx) === undefined) return undefined
  const h = natsHeaders()
  propagator.inject(ctx, h, setter)
  return h
}

/** The `traceparent` value of `ctx`, for stores and HTTP headers. */
export const traceparentOf = (ctx: TraceContext): string | undefined => {
  const carrier: Record<string, string> = {}
  propagator.inject(ctx, carrier, { set: (c, k, v) => void (c[k] = v) })
  return carrier["traceparent"]
}

/** The context a `traceparent` value (an HTTP header, a stored one) names, or the root. */
export const contextOfTraceparent = (traceparent: string | undefined): TraceContext =>
  traceparent === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, { traceparent }, { keys: (c) => Object.keys(c), get: (c, k) => c[k as keyof typeof c] })

