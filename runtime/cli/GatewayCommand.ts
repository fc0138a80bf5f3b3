import { Command, Options } from "@effect/cli"
import { HttpServer } from "@effect/platform"
import { Console, Effect, Layer } from "effect"
import { layerGateway } from "../gateway/Gateway.js"
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
    host: Options.text("host").pipe(Options.withDefault("127.0.0.1"), Options.withDescription("address to listen on"))
  },
  ({ port, host }) =>
    Effect.gen(function* () {
      const url = serverUrl()
      const nats = natsOptionsFromUrl(url, gatewayCredentials)
      const started = Layer.effectDiscard(
        Effect.flatMap(HttpServer.HttpServer, (s) =>
          Console.log(
            [
              `Witness Kernel gateway on http://${s.address._tag === "TcpAddress" ? `${s.address.hostname}:${s.address.port}` : "unix"} (NATS ${nats.servers})`,
              `  inbox:   http://${host}:${port}/inbox/`,
              `  openapi: http://${host}:${port}/openapi.json`
            ].join("\n")
          )
        )
      )
      return yield* Layer.launch(started.pipe(Layer.provideMerge(layerGateway({ nats, port, host }))))
    })
).pipe(Command.withDescription("Serve the HTTP gateway and the web approval inbox for the kernel on NATS_URL (default the embedded wk start server)"))
