import { Command, Options } from "@effect/cli"
import { HttpServer } from "@effect/platform"
import { Console, Effect, Layer } from "effect"
import { layerGateway } from "../gateway/Gateway.js"
import { GatewayMetricsAddress } from "../gateway/GatewayMetrics.js"
import { startTracing, stopTracing } from "../observability/Tracing.js"
import { natsOptionsFromUrl } from "../ledger/Nats.js"
import { serverUrl } from "./Connect.js"

// The gateway relays signed requests and reads the open-call index and the event stream: its own
// role in nats.conf (GATEWAY), dev credentials by default (override with WK_GATEWAY_NATS_USER/PASS).
const gatewayCredentials = { user: process.env["WK_GATEWAY_NATS_USER"] ?? "gateway", pass: process.env["WK_GATEWAY_NATS_PASS"] ?? "gateway-dev" }

/** `wk gateway`: the HTTP gateway and approval inbox in front of a running kernel. */
export const gatewayCommand = Command.make(
  "gateway",
  {
    port: Options.integer("port").pipe(Options.withDefault(Number(process.env["WK_GATEWAY_PORT"] ?? 8787)), Options.withDescription("HTTP port (default 8787, or WK_GATEWAY_PORT)")),
    host: Options.text("host").pipe(Options.withDefault("127.0.0.1"), Options.withDescription("address to listen on")),
    metricsPort: Options.integer("metrics-port").pipe(
      Options.withDefault(Number(process.env["WK_GATEWAY_METRICS_PORT"] ?? 9466)),
      Options.withDescription("serve Prometheus /metrics on this port, apart from the public one (default 9466, or WK_GATEWAY_METRICS_PORT; 0: off)")
    ),
    metricsHost: Options.text("metrics-host").pipe(
      Options.withDefault(process.env["WK_GATEWAY_METRICS_HOST"] || "127.0.0.1"),
      Options.withDescription("address the metrics port listens on (default 127.0.0.1, or WK_GATEWAY_METRICS_HOST)")
    )
  },
  ({ port, host, metricsPort, metricsHost }) =>
    Effect.gen(function* () {
      const url = serverUrl()
      const nats = natsOptionsFromUrl(url, gatewayCredentials)
      const started = Layer.effectDiscard(
        Effect.flatMap(Effect.all([HttpServer.HttpServer, GatewayMetricsAddress]), ([s, m]) =>
          Console.log(
            [
              `Witness Kernel gateway on http://${s.address._tag === "TcpAddress" ? `${s.address.hostname}:${s.address.port}` : "unix"} (NATS ${nats.servers})`,
              `  inbox:   http://${host}:${port}/inbox/`,
              `  openapi: http://${host}:${port}/openapi.json`,
              ...(m.port !== undefined ? [`  metrics: http://${m.host}:${m.port}/metrics  (--metrics-port, --metrics-host)`] : [])
            ].join("\n")
          )
        )
      )
      // Spans over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set: each request continues its caller's trace.
      const tracing = Layer.scopedDiscard(Effect.acquireRelease(Effect.sync(() => startTracing("witness-kernel-gateway")), () => Effect.promise(stopTracing)))
      const metrics = metricsPort === 0 ? {} : { metrics: { port: metricsPort, host: metricsHost } }
      return yield* Layer.launch(started.pipe(Layer.provideMerge(layerGateway({ nats, port, host, ...metrics })), Layer.provideMerge(tracing)))
    })
).pipe(Command.withDescription("Serve the HTTP gateway and the web approval inbox for the kernel on NATS_URL (default the embedded wk start server)"))
