import { Context, Effect } from "effect"
import { createServer } from "node:http"
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client"
import { KernelVersion } from "../observability/KernelVersion.js"

/** The gateway process's Prometheus metrics, in a registry of its own. */
export const makeGatewayMetrics = () => {
  const registry = new Registry()
  const requests = new Counter({ name: "wk_gateway_requests_total", help: "HTTP requests answered, by route and status", labelNames: ["route", "status"] as const, registers: [registry] })
  const seconds = new Histogram({
    name: "wk_gateway_request_seconds",
    help: "Time to answer an HTTP request, by route (server-sent event streams: until the stream starts)",
    labelNames: ["route"] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: [registry]
  })
  const natsConnected = new Gauge({ name: "wk_gateway_nats_connected", help: "1 while the gateway's NATS connection is up", registers: [registry] })
  const buildInfo = new Gauge({ name: "wk_gateway_build_info", help: "1, labelled with the gateway's version and the Node.js version it runs on", labelNames: ["version", "nodejs_version"] as const, registers: [registry] })
  buildInfo.set({ version: KernelVersion, nodejs_version: process.version }, 1)
  // Standard process_ and nodejs_ names: stock Node.js dashboards read them.
  collectDefaultMetrics({ register: registry })
  return { registry, requests, seconds, natsConnected }
}

export type GatewayMetrics = ReturnType<typeof makeGatewayMetrics>

/** The process's gateway metrics. */
export const gatewayMetrics: GatewayMetrics = makeGatewayMetrics()

/** A request path as a route label: held ids and static files folded, so labels stay few. */
export const routeOf = (path: string): string => {
  if (path.startsWith("/inbox")) return "/inbox"
  const p = path.replace(/^\/held\/[^/]+/, "/held/:held_id")
  return ["/tool-calls", "/held", "/held/:held_id", "/held/:held_id/events", "/held/:held_id/attestations", "/held/:held_id/cancel", "/healthz", "/readyz", "/openapi.json", "/"].includes(p) ? p : "other"
}

/** Where the gateway's metrics port listens (the port bound, when 0 was asked); undefined when it is off or taken. */
export class GatewayMetricsAddress extends Context.Tag("wk/gateway/GatewayMetricsAddress")<GatewayMetricsAddress, { readonly port: number | undefined; readonly host: string }>() {}

/**
 * Serves `/metrics` (Prometheus text) on a port of its own, apart from the public one: an
 * operator endpoint, reachable where the operator chooses (`--metrics-host`). `connected`
 * sets `wk_gateway_nats_connected` at each scrape. Closes with the scope; a port in use is
 * reported and the gateway runs on without it.
 */
export const serveGatewayMetrics = (port: number, host: string, connected: () => boolean) =>
  Effect.gen(function* () {
    const server = createServer((req, res) => {
      const path = (req.url ?? "/").split("?")[0]
      if (req.method !== "GET" || path !== "/metrics") {
        res.writeHead(404, { "content-type": "application/json" })
        return void res.end(JSON.stringify({ error: "only GET /metrics" }))
      }
      gatewayMetrics.natsConnected.set(connected() ? 1 : 0)
      gatewayMetrics.registry.metrics().then(
        (text) => {
          res.writeHead(200, { "content-type": gatewayMetrics.registry.contentType, "cache-control": "no-store" })
          res.end(text)
        },
        (e: unknown) => {
          res.writeHead(500, { "content-type": "text/plain" })
          res.end(e instanceof Error ? e.message : String(e))
        }
      )
    })
    const bound = yield* Effect.async<number | undefined>((resume) => {
      server.once("error", (e) => {
        void Effect.runFork(Effect.logWarning(`the gateway's metrics port ${host}:${port} is not served: ${e.message}`))
        resume(Effect.succeed(undefined))
      })
      server.listen(port, host, () => {
        const a = server.address()
        resume(Effect.succeed(typeof a === "object" && a !== null ? a.port : port))
      })
    })
    yield* Effect.addFinalizer(() =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
    )
    return GatewayMetricsAddress.of({ port: bound, host })
  })
