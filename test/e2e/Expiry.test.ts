import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventually } from "../support/Stream.js"
import { failedChecks, replayAs } from "../audit/support.js"

// Expiry people see coming, over NATS: the witness route hears a reminder before a held call
// expires; a witness extends it; the call outlives its first expiry and runs once approved.
let nats: TestNats
let kernel: InProcessKernel
let bank: DemoBank
let agentConn: NatsConnection
let witnessConn: NatsConnection
let toolConn: NatsConnection
let alice: WitnessClient
let carol: WitnessClient
const heard: Array<{ held_id: string; reminder?: boolean; expires_at: string }> = []

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [testProfile()])
  toolConn = await connectAs(nats.servers, "bank")
  bank = new DemoBank().serve(toolConn)
  agentConn = await connectAs(nats.servers, "agent")
  witnessConn = await connectAs(nats.servers, "witness")
  witnessConn.subscribe(Subjects.witnessRequests("*"), { callback: (_e, m) => void heard.push(m.json()) })
  alice = clientFor(agentConn, "agent:alice")
  carol = clientFor(witnessConn, "user:carol")
}, 60_000)

afterAll(async () => {
  await kernel?.stop()
  await Promise.all([agentConn, witnessConn, toolConn].map((c) => c?.close()))
  await nats?.dispose()
})

describe("expiry reminders and extensions", () => {
  it("a reminder reaches the witness route before the expiry; carol extends; the call outlives its first expiry and runs once approved", async () => {
    const r = (await alice.propose({ session_id: "s-expiry", turn_id: "t1", call_id: "x1", tool: "money_transfer", args: { from: "exp-1", to: "shop", amount: 2_000 }, preferences: { expires_in_ms: 4_000 } })) as { status: number; held_id: string }
    expect(r.status).toBe(202)
    const first = (await carol.get(r.held_id)).held!["expires_at"] as string
    await eventually(async () => heard.some((h) => h.held_id === r.held_id && h.reminder === true))
    const reminder = heard.find((h) => h.held_id === r.held_id && h.reminder === true)!
    expect(reminder.expires_at).toBe(first)
    expect(Date.now()).toBeLessThan(Date.parse(first))

    const extended = await carol.extend(r.held_id, "human", new Date(Date.parse(first) + 20_000), "need the invoice first")
    expect(extended).toMatchObject({ status: 202, disposition: "accepted" })
    // Past the first expiry, the call is still open.
    await eventually(async () => Date.now() > Date.parse(first) + 500)
    expect((await carol.get(r.held_id)).held).toMatchObject({ lifecycle: "open", expires_at: extended.expires_at })

    expect((await carol.decide(r.held_id, "human")).disposition).toBe("accepted")
    await eventually(async () => bank.effects === 1)
  }, 60_000)

  it("the proposer cannot extend its own call, and the auditor re-judges every extension", async () => {
    const r = (await alice.propose({ session_id: "s-expiry", turn_id: "t1", call_id: "x2", tool: "money_transfer", args: { from: "exp-2", to: "shop", amount: 2_000 } })) as { held_id: string }
    expect(await clientFor(witnessConn, "agent:alice").extend(r.held_id, "agent", new Date(Date.now() + 600_000))).toMatchObject({ status: 422, reason: "witness is not independent of the proposer" })
    expect(failedChecks(await replayAs(nats.servers, "auditor"))).toEqual([])
  })
})
