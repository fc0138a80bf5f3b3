import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import type { Envelope } from "../../runtime/schema/Envelope.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventCount } from "../support/Stream.js"

// Proposals cannot be replayed. Alice signs her envelopes; the attacker has seen them and holds
// only the shared agent NATS user: it can send any of them again, as often as it likes.
let nats: TestNats
let kernel: InProcessKernel
let bank: DemoBank
const conns: NatsConnection[] = []
let alice: WitnessClient
let attacker: NatsConnection
let kernelConn: NatsConnection

const enc = new TextEncoder()
const send = async (env: Envelope) => (await attacker.request(Subjects.propose, enc.encode(JSON.stringify(env)), { timeout: 15_000 })).json<Record<string, unknown>>()
const inMinutes = (m: number) => new Date(Date.now() + m * 60_000).toISOString()
let n = 0
/** Alice's signed proposal of a transfer (held above 1000) for one call id. */
const signed = (callId: string, amount: number, extra: Record<string, unknown> = {}) =>
  alice.sign({ op: "propose", session_id: "s-replay", turn_id: "t1", call_id: callId, tool: "money_transfer", args: { from: `replay-${callId}`, to: "shop", amount }, nonce: `nonce-${++n}-${callId}`, expires_at: inMinutes(5), ...extra })

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [testProfile()])
  const [agentConn, toolConn, kConn] = await Promise.all((["agent", "bank", "kernel"] as const).map((r) => connectAs(nats.servers, r)))
  conns.push(agentConn!, toolConn!, kConn!)
  bank = new DemoBank().serve(toolConn!)
  alice = clientFor(agentConn!, "agent:alice")
  attacker = agentConn!
  kernelConn = kConn!
}, 60_000)

afterAll(async () => {
  bank?.stop()
  await kernel?.stop()
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
})

describe("propose envelopes cannot be replayed", () => {
  it("a superseded proposal sent again does not come back as a new generation, however often", async () => {
    const first = signed("edit", 5_000)
    expect(await send(first)).toMatchObject({ status: 202, generation: 1 })
    const edit = signed("edit", 4_000, { supersedes: 1 })
    const edited = await send(edit)
    expect(edited).toMatchObject({ status: 202, generation: 2 })
    for (let i = 0; i < 3; i++) expect(await send(first)).toMatchObject({ status: 409, error: { code: "superseded" } })
    const held = (await alice.get(String(edited["held_id"]))).held!
    expect(held).toMatchObject({ generation: 2, args: { amount: 4_000 } })
    // The agent edits again; its earlier edit, replayed, is just as dead.
    expect(await send(signed("edit", 3_000, { supersedes: 2 }))).toMatchObject({ status: 202, generation: 3 })
    expect(await send(edit)).toMatchObject({ status: 409, error: { code: "superseded" } })
    expect((await alice.get(String(edited["held_id"]))).held).toMatchObject({ generation: 3, args: { amount: 3_000 } })
  })

  it("the same envelope again is a duplicate: the same reply and no new event", async () => {
    const env = signed("dup", 6_000)
    const reply = await send(env)
    expect(reply).toMatchObject({ status: 202, generation: 1 })
    const before = await eventCount(kernelConn)
    expect(await send(env)).toEqual(reply)
    expect(await eventCount(kernelConn)).toBe(before)
  })

  it("an expired envelope is refused and records nothing; so is one that would stay valid too long", async () => {
    const before = await eventCount(kernelConn)
    expect(await send(signed("old", 50, { expires_at: inMinutes(-1) }))).toMatchObject({ status: 409, error: { code: "envelope_expired", path: "payload.expires_at" } })
    expect(await send(signed("forever", 50, { expires_at: inMinutes(60 * 24 * 365) }))).toMatchObject({ status: 400, error: { code: "invalid_request", path: "payload.expires_at" } })
    expect(await eventCount(kernelConn)).toBe(before)
    expect(bank.effects).toBe(0)
  })

  it("a proposal without nonce, expiry or supersedes (a v1 client's) is accepted, and so is its edit", async () => {
    const v1 = (amount: number) => alice.sign({ op: "propose", session_id: "s-replay", turn_id: "t1", call_id: "v1", tool: "money_transfer", args: { from: "replay-v1", to: "shop", amount } })
    expect(await send(v1(5_000))).toMatchObject({ status: 202, generation: 1 })
    expect(await send(v1(5_000))).toMatchObject({ status: 202, generation: 1 })
    expect(await send(v1(5_500))).toMatchObject({ status: 202, generation: 2 })
  })

  it("a replayed earlier generation without supersedes is refused, with or without nonce and expiry", async () => {
    const first = signed("client", 7_000)
    expect(await send(first)).toMatchObject({ status: 202, generation: 1 })
    expect(await send(signed("client", 7_500))).toMatchObject({ status: 202, generation: 2 })
    const before = await eventCount(kernelConn)
    expect(await send(first)).toMatchObject({ status: 409, error: { code: "superseded" } })
    const { nonce: _n, expires_at: _e, ...bare } = first.payload as Record<string, unknown>
    expect(await send(alice.sign(bare))).toMatchObject({ status: 409, error: { code: "superseded" } })
    expect(await eventCount(kernelConn)).toBe(before)
    const edited = await alice.propose({ session_id: "s-replay", turn_id: "t1", call_id: "client", tool: "money_transfer", args: { from: "replay-client", to: "shop", amount: 7_600 }, supersedes: 2 })
    expect(edited).toMatchObject({ status: 202, generation: 3 })
    // The client remembers generation 3 and edits it, naming it without being told.
    expect(await alice.propose({ session_id: "s-replay", turn_id: "t1", call_id: "client", tool: "money_transfer", args: { from: "replay-client", to: "shop", amount: 7_000 } })).toMatchObject({ status: 202, generation: 4 })
  })
})
