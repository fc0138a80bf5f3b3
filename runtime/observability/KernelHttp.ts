import { Effect } from "effect"
import { log } from "./Log.js"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import { kernelMetrics } from "./KernelMetrics.js"
import { KernelProbe } from "./KernelProbe.js"

/** One readiness check: its name, and why it fails (undefined: it passes). */
interface Check {
  readonly name: string
  readonly failure: string | undefined
}

/**
 * How long one readiness check may take. The checks run at once, so `/readyz` answers within
 * this (and a little) however NATS fails: inside a probe's default 1 s timeout (Kubernetes'
 * `timeoutSeconds: 1`), whether the server is gone or hangs (SIGSTOP: the socket stays open).
 */
export const ReadinessDeadlineMs = 500

/** Fails a promise that takes longer than `ms`. */
const within = <A>(ms: number, p: Promise<A>): Promise<A> =>
  Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms).unref())])

const describe = (e: unknown) => (e instanceof Error ? e.message : String(e))

/**
 * The kernel's operator endpoints on a small HTTP port: `/metrics` (Prometheus text),
 * `/healthz` (the process answers; reads nothing), `/readyz` (NATS answers a round trip, the
 * streams there, a policy loaded, the controller's consumer bound; 503 naming what is not; every
 * check at once, each within `ReadinessDeadlineMs`). Listens on `host` (127.0.0.1 unless told:
 * `--metrics-host`) until the scope closes; a port in use is reported and the kernel runs on
 * without it. What it reads comes through the `KernelProbe` port.
 */
export const serveKernelHttp = (port: number, host = "127.0.0.1") =>
  Effect.gen(function* () {
    const probe = yield* KernelProbe
    kernelMetrics.onScrape(async () => {
      kernelMetrics.policyEpoch.set(await probe.policyEpoch())
      kernelMetrics.consumerLag.set(await within(1000, probe.consumerPending()))
    })
    kernelMetrics.onScrape(async () => {
      const counts = await within(2000, probe.openCallsByState())
      kernelMetrics.openCalls.reset()
      for (const [state, n] of counts) kernelMetrics.openCalls.set({ state }, n)
    })
    const check = async (name: string, f: () => Promise<string | undefined>): Promise<Check> => {
      try {
        return { name, failure: await within(ReadinessDeadlineMs, f()) }
      } catch (e) {
        return { name, failure: describe(e) }
      }
    }
    const readiness = (): Promise<ReadonlyArray<Check>> => {
      if (!probe.connected()) return Promise.resolve(["nats", "streams", "policy", "consumer"].map((name) => ({ name, failure: name === "nats" ? "not connected to NATS" : "NATS is not connected" })))
      return Promise.all([
        // A round trip: a server that hangs keeps the connection open and answers nothing.
        check("nats", async () => {
          await probe.roundTrip()
          return undefined
        }),
        check("streams", async () => {
          await probe.streamsPresent()
          return undefined
        }),
        check("policy", async () => ((await probe.policyEpoch()) >= 1 ? undefined : "no policy epoch loaded")),
        check("consumer", async () => {
          await probe.consumerPending()
          return undefined
        })
      ])
    }
    const send = (res: ServerResponse, status: number, type: string, body: string) => {
      res.writeHead(status, { "content-type": type, "cache-control": "no-store" })
      res.end(body)
    }
    const handle = (req: IncomingMessage, res: ServerResponse) => {
      const path = (req.url ?? "/").split("?")[0]
      if (req.method !== "GET") return send(res, 405, "application/json", JSON.stringify({ error: "only GET" }))
      if (path === "/healthz") return send(res, 200, "application/json", JSON.stringify({ status: "ok" }))
      if (path === "/readyz") {
        return void readiness().then((checks) => {
          const failing = checks.filter((c) => c.failure !== undefined)
          send(res, failing.length === 0 ? 200 : 503, "application/json", JSON.stringify({ status: failing.length === 0 ? "ready" : "not ready", checks: Object.fromEntries(checks.map((c) => [c.name, c.failure ?? "ok"])) }))
        })
      }
      if (path === "/metrics") {
        return void kernelMetrics.scrape().then(
          (text) => send(res, 200, kernelMetrics.registry.contentType, text),
          (e: unknown) => send(res, 500, "text/plain", describe(e))
        )
      }
      send(res, 404, "application/json", JSON.stringify({ error: "no such route: /metrics, /healthz, /readyz" }))
    }
    const server = createServer(handle)
    const bound = yield* Effect.async<number | undefined>((resume) => {
      server.once("error", (e) => {
        log.warn({ port, host, err: describe(e) }, "the metrics and health port is not served")
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
    return bound
  })
