import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { join } from "node:path"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { jetstreamManager } from "@nats-io/jetstream"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { Streams, Subjects, inboxOptionOf } from "../../runtime/schema/Subjects.js"
import { RouteRunner } from "../../runtime/routes/RouteRunner.js"
import { decodeRouteConfig, type RouteConfig } from "../../runtime/routes/RouteConfig.js"
import type { RoutedRequest } from "../../runtime/routes/Senders.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { profileDir, startKernelProcess, type KernelProcess } from "../support/KernelProcess.js"
import { eventually } from "../support/Stream.js"

// The witness request is part of the hold's commit: a kernel killed right after the commit of a
// hold, before the request leaves it (a preload SIGKILLs the process on its first publish to a
// witness request subject), loses nothing. The next kernel's recovery sweep finds the open held
// call in the durable record and publishes its request; a route started afterwards, for the first
// time, is served it.
let nats: TestNats
let kernelConn: NatsConnection
let agentConn: NatsConnection
let bankConn: NatsConnection
let routeConn: NatsConnection
let hook: Server
let runner: RouteRunner | undefined
const kernels: Array<KernelProcess> = []
const received: Array<RoutedRequest> = []

const openHeldIds = async (): Promise<Array<string>> => {
  const info = await (await jetstreamManager(kernelConn)).streams.info(Streams.events, { subjects_filter: "wk.v1.events.>" })
  return Object.keys(info.state.subjects ?? {}).map((s) => s.slice("wk.v1.events.".length)).filter((id) => id.startsWith("h_"))
}
const requestsKept = async (heldId: string): Promise<number> => {
  const info = await (await jetstreamManager(kernelConn)).streams.info(Streams.witness, { subjects_filter: Subjects.witnessRequests(heldId) })
  return info.state.subjects?.[Subjects.witnessRequests(heldId)] ?? 0
}

beforeAll(async () => {
  nats = await startTestNats()
  kernelConn = await connectAs(nats.servers, "kernel")
  agentConn = await connectAs(nats.servers, "agent")
  bankConn = await connectAs(nats.servers, "bank")
  routeConn = await connect({ servers: nats.servers, user: "route", pass: "route-dev", ...inboxOptionOf("route") })
  new DemoBank().serve(bankConn)
  hook = createServer((req, res) => {
    let text = ""
    req.on("data", (d: Buffer) => (text += d.toString()))
    req.on("end", () => (received.push(JSON.parse(text) as RoutedRequest), res.writeHead(200).end()))
  })
  await new Promise<void>((resolve) => hook.listen(0, "127.0.0.1", () => resolve()))
}, 60_000)

afterAll(async () => {
  await runner?.stop()
  hook?.close()
  await Promise.all(kernels.map((k) => k.kill()))
  await Promise.all([kernelConn, agentConn, bankConn, routeConn].map((c) => c?.close()))
  await nats?.dispose()
})

describe("the witness request is part of the hold's commit", () => {
  it("a kernel killed right after a hold's commit: the next kernel publishes the request and a route that starts afterwards is served it", async () => {
    const profiles = profileDir([testProfile()])
    const victim = await startKernelProcess(nats.servers, profiles, { WK_SWEEP_MS: "0", WK_CLI_SOURCES: "1" }, ["--import", join(repoRoot, "test/integrations/KillAfterHoldCommit.mjs")])
    kernels.push(victim)
    const alice = clientFor(agentConn, "agent:alice", 3_000)
    void alice.propose({ session_id: "s-crash", turn_id: "t1", call_id: "c1", tool: "money_transfer", args: { from: "crash-1", to: "shop", amount: 2_500 } }).catch(() => undefined)
    await eventually(async () => victim.child.signalCode === "SIGKILL", 30_000)
    const [heldId] = await openHeldIds()
    expect(heldId).toMatch(/^h_[0-9a-f]{32}$/)
    // The hold is committed and nothing was sent.
    expect(await requestsKept(heldId!)).toBe(0)

    kernels.push(await startKernelProcess(nats.servers, profiles, { WK_SWEEP_MS: "60000" }))
    await eventually(async () => (await requestsKept(heldId!)) === 1, 30_000)
    const config: RouteConfig = (() => {
      const c = decodeRouteConfig(JSON.stringify({ routes: { ops: { kind: "webhook", url: `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook`, secret: "crash-route-secret-0123" } } }), "routes.json")
      if (c._tag === "Left") throw new Error(c.left)
      return c.right
    })()
    runner = await new RouteRunner(routeConn, config).start()
    const got = await eventually(async () => received.find((r) => r.held_id === heldId))
    expect(got).toMatchObject({ held_id: heldId, generation: 1, witness_request: { contract_digest: expect.stringMatching(/^[0-9a-f]{64}$/) } })
    // The sweep publishes once per generation and presentation: a second pass sends nothing more.
    expect(await requestsKept(heldId!)).toBe(1)
  }, 180_000)
})
