import { trace } from "@opentelemetry/api"
import { Effect } from "effect"
import type { HttpServerResponse } from "@effect/platform"
import { contextOfTraceparent, CurrentTrace, SpanKind, tracingEnabled, withSpan } from "../observability/Tracing.js"

/**
 * Runs one HTTP request of the gateway in the caller's trace: a `wk.gateway <METHOD> <route>`
 * server span whose parent is the request's `traceparent`, when this process records spans
 * (OTLP configured); without, the caller's context itself. Either is the fiber's `CurrentTrace`,
 * which the kernel link hands on with every request it sends, reads included.
 */
export const requestSpan = <E, R>(method: string, route: string, traceparent: string | undefined, handle: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) => {
  const parent = contextOfTraceparent(traceparent)
  if (!tracingEnabled()) return trace.getSpanContext(parent) === undefined ? handle : Effect.locally(handle, CurrentTrace, parent)
  return withSpan(`wk.gateway ${method} ${route}`, handle, {
    kind: SpanKind.SERVER,
    parent,
    attributes: { "http.request.method": method, "http.route": route },
    onSuccess: (span, response: HttpServerResponse.HttpServerResponse) => void span.setAttribute("http.response.status_code", response.status)
  })
}
