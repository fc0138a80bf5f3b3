import { HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Cause, Effect, Layer } from "effect"
import { createServer } from "node:http"
import { KernelLink, layerKernelLink, type GatewayNats } from "./KernelLink.js"
import { gatewayRouter } from "./Routes.js"
import { GatewayMetricsAddress, gatewayMetrics, routeOf, serveGatewayMetrics } from "./GatewayMetrics.js"
import { ReadNonces } from "./SignedRead.js"
import { requestSpan } from "./GatewaySpans.js"

export interface GatewayOptions {
  readonly nats: GatewayNats
  /** 0 picks a free port (tests read it from HttpServer's address). */
  readonly port: number
  readonly host?: string
  /** The metrics port (`/metrics`, apart from the public port; 0 picks a free one) and its address (default 127.0.0.1); none without. */
  readonly metrics?: { readonly port: number; readonly host?: string }
}

const notFound = HttpServerResponse.unsafeJson({ status: 404, error: { code: "not_found", message: "no such route" } }, { status: 404 })

/**
 * What a request that did not complete is answered: one interrupted (its client went away
 * mid-answer, a page reloaded while its files loaded) is no gateway error and is counted as 499
 * (client closed request); anything else is a defect, logged, and a JSON 500.
 */
export const failedRequestResponse = (cause: Cause.Cause<unknown>) =>
  Cause.isInterruptedOnly(cause)
    ? Effect.as(Effect.logDebug("gateway request interrupted"), HttpServerResponse.empty({ status: 499 }))
    : Effect.as(Effect.logError("gateway request failed", cause), HttpServerResponse.unsafeJson({ status: 500, error: { code: "internal", message: "gateway error" } }, { status: 500 }))

/**
 * The gateway's app: routes, a JSON 404 for anything else, a JSON 500 for defects (499 for an
 * interrupted request); each request counted, timed, and run in a span that continues the
 * caller's `traceparent` (what it asks of the kernel joins that trace).
 */
export const gatewayApp = Effect.gen(function* () {
  const started = performance.now()
  const request = yield* HttpServerRequest.HttpServerRequest
  const route = routeOf(new URL(request.url, "http://gateway").pathname)
  const response = yield* requestSpan(
    request.method,
    route,
    request.headers["traceparent"],
    gatewayRouter.pipe(
      Effect.catchTag("RouteNotFound", () => Effect.succeed(notFound)),
      Effect.catchAllCause(failedRequestResponse)
    )
  )
  gatewayMetrics.requests.inc({ route, status: String(response.status) })
  gatewayMetrics.seconds.observe({ route }, (performance.now() - started) / 1000)
  return response
})

/**
 * The HTTP gateway as a layer: listening while the layer is alive (NATS connection included);
 * exposes the bound server. Closing it first drops open connections, so inbox tabs following a
 * call (SSE) do not keep the server from stopping.
 */
export const layerGateway = (opts: GatewayOptions) =>
  Layer.suspend(() => {
    const server = createServer()
    const dropConnections = Layer.scopedDiscard(Effect.addFinalizer(() => Effect.sync(() => server.closeAllConnections())))
    const link = layerKernelLink(opts.nats)
    const m = opts.metrics
    const metrics =
      m === undefined
        ? Layer.succeed(GatewayMetricsAddress, GatewayMetricsAddress.of({ port: undefined, host: "" }))
        : Layer.scoped(GatewayMetricsAddress, Effect.flatMap(KernelLink, (l) => serveGatewayMetrics(m.port, m.host ?? "127.0.0.1", l.connected))).pipe(Layer.provide(link))
    return dropConnections.pipe(
      Layer.provideMerge(HttpServer.serve(gatewayApp).pipe(Layer.provide(Layer.merge(link, ReadNonces.layer)))),
      Layer.provideMerge(NodeHttpServer.layer(() => server, { port: opts.port, host: opts.host ?? "127.0.0.1" })),
      Layer.merge(metrics)
    )
  })
