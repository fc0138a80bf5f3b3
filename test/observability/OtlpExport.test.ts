import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { profileDir, startKernelProcess, type KernelProcess } from "../support/KernelProcess.js"
import { eventually } from "../support/Stream.js"

// A kernel started with OTEL_EXPORTER_OTLP_ENDPOINT exports its spans over OTLP/HTTP: a receiver
// the test runs gets `wk.propose` for a call, with the kernel's service name; the kernel's log
// lines about that call carry the exported trace's id and a span id, so logs and traces join.
let nats: TestNats
let kernel: KernelProcess
let receiver: Server
let agentConn: NatsConnection
let toolConn: NatsConnection
const posts: Array<{ path: string; body: string }> = []

beforeAll(async () => {
  receiver = createServer((req, res) => {
    let body = ""
    req.on("data", (d: Buffer) => (body += d.toString()))
    req.on("end", () => {
      posts.push({ path: req.url ?? "", body })
      res.writeHead(200, { "content-type": "application/json" }).end("{}")
    })
  })
  await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r))
  const { port } = receiver.address() as AddressInfo
  nats = await startTestNats()
  const profiles = profileDir([testProfile()])
  const env = { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_BSP_SCHEDULE_DELAY: "100", OTEL_SERVICE_NAME: "wk-otlp-test", WK_LOG_LEVEL: "debug" }
  // Started twice: the bundled CLI writes its code cache when a command exits, and the exporter's
  // `import("http")` must work in a start that runs from that cache too.
  await (await startKernelProcess(nats.servers, profiles, env)).stop()
  kernel = await startKernelProcess(nats.servers, profiles, env)
  toolConn = await connectAs(nats.servers, "bank")
  new DemoBank().serve(toolConn)
  agentConn = await connectAs(nats.servers, "agent")
}, 120_000)

afterAll(async () => {
  await kernel?.stop()
  await Promise.all([agentConn, toolConn].map((c) => c?.close()))
  await nats?.dispose()
  receiver?.close()
})

describe("OTLP export", () => {
  it("a call's spans reach the configured OTLP endpoint", async () => {
    const reply = (await clientFor(agentConn, "agent:alice").propose({ session_id: "s-otlp", turn_id: "t1", call_id: "o1", tool: "money_transfer", args: { from: "a", to: "b", amount: 10 } })) as { status: number; held_id: string }
    expect(reply.status).toBe(200)
    const post = await eventually(async () => posts.find((p) => p.body.includes(reply.held_id) && p.body.includes("wk.propose")))
    expect(post.path).toBe("/v1/traces")
    expect(post.body).toContain("wk-otlp-test")
    // The batch processor may send the tool's span in a later post than the proposal's.
    await eventually(async () => posts.some((p) => p.body.includes("wk.tool invoke") && p.body.includes("wk-otlp-test")))
    const lines = kernel
      .output()
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l["held_id"] === reply.held_id && l["msg"] === "committed")
    expect(lines.length).toBeGreaterThan(0)
    for (const l of lines) expect(l).toMatchObject({ level: "debug", trace_id: expect.stringMatching(/^[0-9a-f]{32}$/), span_id: expect.stringMatching(/^[0-9a-f]{16}$/) })
    const traceId = lines[0]!["trace_id"] as string
    expect(lines.every((l) => l["trace_id"] === traceId)).toBe(true)
    // The exported spans name the same trace (OTLP/JSON writes ids in hex).
    await eventually(async () => posts.some((p) => p.body.includes(traceId) && p.body.includes("wk.propose")))
  })
})
