import { Command, Options } from "@effect/cli"
import { HttpServer } from "@effect/platform"
import { Console, Effect, Layer } from "effect"
import { layerGateway } from "../gateway/Gateway.js"
import { GatewayMetricsAddress } from "../gateway/GatewayMetrics.js"
import { startTracing, stopTracing } from "../observability/Tracing.js"
import { natsOptionsFromUrl } from "../ledger/Nats.js"
import { CliError } from "./CliError.js"
import { connectFailure, serverUrl } from "./Connect.js"
import { ExitCode } from "./Exit.js"

// The gateway relays signed requests and reads the open-call index and the event stream: its own
// role in nats.conf (GATEWAY), dev credentials by default (override with WK_GATEWAY_NATS_USER/PASS).
const gatewayCredentials = { user: process.env["WK_GATEWAY_NATS_USER"] ?? "gateway", pass: process.env["WK_GATEWAY_NATS_PASS"] ?? "gateway-dev" }

/** The error code of a listen failure (`EADDRINUSE`, `EACCES`), found on the error or its cause. */
const listenCode = (e: unknown): string | undefined => {
  for (let x = e, i = 0; typeof x === "object" && x !== null && i < 4; x = (x as { cause?: unknown }).cause, i++) {
    const code = (x as { code?: unknown }).code
    if (typeof code === "string") return code
  }
  return undefined
}

/** Why the gateway could not start, as one line with its exit code (docs/cli.md): NATS down 7, its login refused 6, the port 1. */
export const gatewayFailure = (e: unknown, nats: ReturnType<typeof natsOptionsFromUrl>, port: number, host: string): CliError => {
  if (typeof e === "object" && e !== null && (e as { _tag?: unknown })._tag === "GatewayNatsError") return connectFailure((e as { cause?: unknown }).cause ?? e, nats)
  const code = listenCode(e)
  if (code === "EADDRINUSE") return new CliError({ message: `port ${port} on ${host} is in use by another program: stop it, or serve on another port (--port N, or WK_GATEWAY_PORT)`, exit: ExitCode.failed })
  if (code === "EACCES") return new CliError({ message: `not allowed to listen on port ${port} on ${host} (ports below 1024 need privileges): serve on another port (--port N)`, exit: ExitCode.failed })
  if (code === "EADDRNOTAVAIL") return new CliError({ message: `cannot listen on ${host}: no such address on this machine (--host ADDR)`, exit: ExitCode.failed })
  const message = e instanceof Error ? e.message : typeof e === "object" && e !== null && typeof (e as { message?: unknown }).message === "string" ? (e as { message: string }).message : String(e)
  return new CliError({ message: `the gateway could not start: ${message.split("\n")[0]}`, exit: ExitCode.failed })
}

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
      return yield* Layer.launch(started.pipe(Layer.provideMerge(layerGateway({ nats, port, host, ...metrics })), Layer.provideMerge(tracing))).pipe(
        Effect.catchAll((e) => Effect.fail(gatewayFailure(e, nats, port, host)))
      )
    })
).pipe(Command.withDescription("Serve the HTTP gateway and the web approval inbox for the kernel on NATS_URL (default the embedded wk start server)"))
