import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { devPublicKey } from "../../runtime/client/DevKeys.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { EchoTool } from "../support/EchoTool.js"
import { eventually } from "../support/Stream.js"

// Peer adjudication: another agent reviews a call as a witness under its own principal, key and
// policy. A reviewer registered in the proposer's session namespace acts for it: refused, even
// with its own principal and key. A reviewer of another namespace counts. Each reviewer's own
// calls are governed by its own grants.
let nats: TestNats
let kernel: InProcessKernel
let echo: EchoTool
let echoConn: NatsConnection
let agentConn: NatsConnection
let witnessConn: NatsConnection
let alice: WitnessClient

const entry = (name: string, classes: Array<string>, namespace?: string) => [name, { keys: [devPublicKey(name)], classes, ...(namespace !== undefined ? { namespace } : {}) }] as const
const base = testProfile()
const profile = testProfile({
  principals: { ...base.principals, ...Object.fromEntries([entry("agent:alice", ["agent"], "alice"), entry("agent:alice-reviewer", ["peer"], "alice"), entry("agent:bob-reviewer", ["peer"], "bob")]) },
  grants: { "agent:alice": ["deploy"], "agent:bob-reviewer": ["web_fetch"] },
  rules: { deploy: { always_witness: true, contract: { rule: { class: "peer" } } } }
})

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [profile])
  echoConn = await connectAs(nats.servers, "echo")
  echo = new EchoTool(["deploy", "web_fetch"]).serve(echoConn)
  agentConn = await connectAs(nats.servers, "agent")
  witnessConn = await connectAs(nats.servers, "witness")
  alice = clientFor(agentConn, "agent:alice")
}, 60_000)

afterAll(async () => {
  echo?.stop()
  await kernel?.stop()
  await Promise.all([echoConn, agentConn, witnessConn].map((c) => c?.close()))
  await nats?.dispose()
})

describe("peer adjudication", () => {
  it("a reviewer in the proposer's namespace is refused; one of another namespace releases the call; each reviewer's own calls follow its own policy", async () => {
    const r = (await alice.propose({ session_id: "alice.s1", turn_id: "t1", call_id: "p1", tool: "deploy", args: { service: "web" } })) as { status: number; held_id: string }
    expect(r.status).toBe(202)
    const sameNamespace = await clientFor(witnessConn, "agent:alice-reviewer").decide(r.held_id, "peer")
    expect(sameNamespace).toMatchObject({ disposition: "invalid", reason: "witness is not independent of the proposer: it acts in the proposer's session namespace 'alice'" })
    expect(echo.effects).toBe(0)
    expect((await clientFor(witnessConn, "agent:bob-reviewer").decide(r.held_id, "peer")).disposition).toBe("accepted")
    await eventually(async () => echo.effects === 1)
    // The reviewer's own tool calls are decided by its own grants: web_fetch yes, deploy no.
    const bobAgent = clientFor(agentConn, "agent:bob-reviewer")
    expect((await bobAgent.propose({ session_id: "bob.s1", turn_id: "t1", call_id: "f1", tool: "web_fetch", args: { url: "https://example.com" } })).status).toBe(200)
    expect((await bobAgent.propose({ session_id: "bob.s1", turn_id: "t1", call_id: "d1", tool: "deploy", args: { service: "web" } })).status).toBe(403)
  })
})
