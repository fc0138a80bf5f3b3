import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client"

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
  collectDefaultMetrics({ register: registry, prefix: "wk_gateway_" })
  return { registry, requests, seconds, natsConnected }
}

export type GatewayMetrics = ReturnType<typeof makeGatewayMetrics>

/** The process's gateway metrics. */
export const gatewayMetrics: GatewayMetrics = makeGatewayMetrics()

/** A request path as a route label: held ids and static files folded, so labels stay few. */
export const routeOf = (path: string): string => {
  if (path.startsWith("/inbox")) return "/inbox"
  const p = path.replace(/^\/held\/[^/]+/, "/held/:held_id")
  return ["/tool-calls", "/held", "/held/:held_id", "/held/:held_id/events", "/held/:held_id/attestations", "/held/:held_id/cancel", "/healthz", "/readyz", "/metrics", "/openapi.json", "/"].includes(p) ? p : "other"
}
