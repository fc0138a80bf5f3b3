import { ROOT_CONTEXT, trace, type Context as TraceContext } from "@opentelemetry/api"
import { W3CTraceContextPropagator } from "@opentelemetry/core"

/**
 * W3C trace context (`traceparent`, `tracestate`) on message headers and in plain strings: how
 * agents, the gateway, the kernel and tool services hand a trace on. No SDK: clients load this.
 */
const propagator = new W3CTraceContextPropagator()

/** Message headers as any transport holds them (NATS's `MsgHdrs` is one): the propagator reads and writes only these. */
export interface HeaderCarrier {
  readonly keys: () => Array<string>
  readonly has: (key: string) => boolean
  readonly get: (key: string) => string
}

const getter = {
  keys: (h: HeaderCarrier) => h.keys(),
  get: (h: HeaderCarrier, key: string) => (h.has(key) ? h.get(key) : undefined)
}

/** The trace context a message's headers carry (`traceparent`, `tracestate`), or the root. */
export const contextOfHeaders = (h: HeaderCarrier | undefined): TraceContext => (h === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, h, getter))

/**
 * `traceparent` (and `tracestate`) for `ctx` on headers that `make` creates (the transport's own,
 * e.g. NATS's `headers`); undefined when `ctx` holds no span.
 */
export const headersOfContext = <H extends { readonly set: (key: string, value: string) => void }>(ctx: TraceContext, make: () => H): H | undefined => {
  if (trace.getSpanContext(ctx) === undefined) return undefined
  const h = make()
  propagator.inject(ctx, h, { set: (c, key, value) => c.set(key, value) })
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

