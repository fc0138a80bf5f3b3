import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { spawn, type ChildProcess } from "node:child_process"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { join } from "node:path"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { freePort } from "../../runtime/cli/EmbeddedNats.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { eventually } from "../support/Stream.js"

// `wk gateway` as an operator runs it: its metrics on the port given for them (not on the public
// one), and, with OTEL_EXPORTER_OTLP_ENDPOINT set, its own spans exported, each request's span a
// child of the caller's traceparent.
let nats: TestNats
let receiver: Server
let gateway: ChildProcess
let output = ""
let port = 0
let metricsPort = 0
const posts: Array<string> = []

beforeAll(async () => {
  receiver = createServer((req, res) => {
    let body = ""
    req.on("data", (d: Buffer) => (body += d.toString()))
    req.on("end", () => {
      posts.push(body)
      res.writeHead(200, { "content-type": "application/json" }).end("{}")
    })
  })
  await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r))
  nats = await startTestNats()
  ;[port, metricsPort] = [await freePort(), await freePort()]
  gateway = spawn(process.execPath, ["--disable-warning=ExperimentalWarning", join(repoRoot, "runtime/cli/wk.mjs"), "gateway", "--port", String(port), "--metrics-port", String(metricsPort)], {
    cwd: repoRoot,
    env: { ...process.env, NATS_URL: `nats://${nats.servers}`, OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`, OTEL_BSP_SCHEDULE_DELAY: "100" },
    stdio: ["ignore", "pipe", "pipe"]
  })
  gateway.stdout!.on("data", (d: Buffer) => (output += d.toString()))
  gateway.stderr!.on("data", (d: Buffer) => (output += d.toString()))
  await eventually(async () => output.includes("metrics:") || gateway.exitCode !== null, 90_000)
}, 120_000)

afterAll(async () => {
  if (gateway !== undefined && gateway.exitCode === null && gateway.signalCode === null) {
    const exited = new Promise((r) => gateway.once("exit", r))
    gateway.kill("SIGINT")
    await exited
  }
  await nats?.dispose()
  receiver?.close()
})

describe("wk gateway", () => {
  it("serves its metrics on their own port only, and says where", async () => {
    expect(output).toContain(`metrics: http://127.0.0.1:${metricsPort}/metrics`)
    expect((await fetch(`http://127.0.0.1:${port}/metrics`)).status).toBe(404)
    const m = await fetch(`http://127.0.0.1:${metricsPort}/metrics`)
    expect(m.status).toBe(200)
    expect(await m.text()).toMatch(/^wk_gateway_nats_connected 1$/m)
  })

  it("exports a span of its own per request, in the caller's trace", async () => {
    const traceId = "6cf92f3577b34da6a3ce929d0e0e4738"
    expect((await fetch(`http://127.0.0.1:${port}/healthz`, { headers: { traceparent: `00-${traceId}-22f067aa0ba902b9-01` } })).status).toBe(200)
    const body = await eventually(async () => posts.find((p) => p.includes(traceId)), 30_000)
    expect(body).toContain("wk.gateway GET /healthz")
    expect(body).toContain("witness-kernel-gateway")
    expect(body).toContain("22f067aa0ba902b9")
  })
})
