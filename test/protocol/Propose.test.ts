import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import nacl from "tweetnacl"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { signEnvelope } from "../../runtime/schema/EnvelopeSignature.js"
import { devKeyPair } from "../../runtime/client/DevKeys.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import { heldIdOf } from "../../runtime/schema/Canonical.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventCount, eventsOf } from "../support/Stream.js"
import type { WitnessClient } from "../../runtime/client/Client.js"

let nats: TestNats
let kernel: InProcessKernel
let bank: DemoBank
let agentConn: NatsConnection
let toolConn: NatsConnection
let kernelConn: NatsConnection
let alice: WitnessClient
const profiles = [testProfile()]
let n = 0
const call = (args: Record<string, unknown>, tool = "money_transfer") => ({ session_id: "s-propose", turn_id: "t1", call_id: `c${++n}`, tool, args: args as never })

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, profiles)
  toolConn = await connectAs(nats.servers, "bank")
  bank = new DemoBank().serve(toolConn)
  agentConn = await connectAs(nats.servers, "agent")
  kernelConn = await connectAs(nats.servers, "kernel")
  alice = clientFor(agentConn, "agent:alice")
})

afterAll(async () => {
  await kernel?.stop()
  await Promise.all([agentConn?.close(), toolConn?.close(), kernelConn?.close()])
  await nats?.dispose()
})

describe("propose over NATS", () => {
  it("ALLOW executes once and moves the balance once", async () => {
    const effects = bank.effects
    const reply = await alice.propose(call({ from: "allow-a", to: "allow-b", amount: 250 }))
    expect(reply).toMatchObject({ status: 200, outcome: "completed", admission: "admitted", ok: true, result: { amount: 250, balance_from: 9750 } })
    expect(bank.effects - effects).toBe(1)
    expect(bank.balance("allow-a")).toBe(9750)
    expect(bank.balance("allow-b")).toBe(10250)
    const types = (await eventsOf(kernelConn, (reply as { held_id: string }).held_id)).map((e) => e.type)
    expect(types).toEqual(["call.proposed", "call.adjudicated", "execution.leased", "effect.dispatched", "effect.recorded", "result.admitted"])
  })

  it("DENY never reaches the bank: over the hard cap, and a tool without a grant", async () => {
    const effects = bank.effects
    const over = await alice.propose(call({ from: "deny-a", to: "deny-b", amount: 500_000 }))
    expect(over).toMatchObject({ status: 403, outcome: "denied", reasons: [{ by: "rule:money_transfer" }] })
    const ungranted = await alice.propose(call({ path: "/" }, "delete_everything"))
    expect(ungranted).toMatchObject({ status: 403, outcome: "denied", reasons: [{ by: "kernel" }] })
    expect(bank.effects).toBe(effects)
    expect(bank.balance("deny-a")).toBe(10_000)
  })

  it("REQUIRE_WITNESS returns 202 with a held id, and held.get shows the facts", async () => {
    const reply = await alice.propose({ ...call({ from: "rw-a", to: "rw-b", amount: 5000 }), continuation_ref: "turn-7" })
    expect(reply).toMatchObject({ status: 202, outcome: "held", generation: 1, witness_request: { contract: { rule: { class: "human" } } } })
    const held = reply as { held_id: string; call_digest: string; witness_request: { contract_digest: string } }
    const got = await alice.get(held.held_id)
    expect(got.status).toBe(200)
    expect(got.held).toMatchObject({
      held_id: held.held_id,
      session_id: "s-propose",
      principal: "agent:alice",
      tool: "money_transfer",
      call_digest: held.call_digest,
      generation: 1,
      contract_digest: held.witness_request.contract_digest,
      lifecycle: "open",
      readiness: "unsatisfied",
      execution: "none",
      result_admission: "pending",
      continuation_delivery: "none",
      evidence: []
    })
    expect(bank.balance("rw-a")).toBe(10_000)
  })

  it("the same proposal sent 50 times concurrently yields one held call and at most one effect", async () => {
    for (const amount of [300, 3000]) {
      const effects = bank.effects
      const c = call({ from: `dup-${amount}`, to: "dup-b", amount })
      const t0 = Date.now()
      const replies = await Promise.all(Array.from({ length: 50 }, () => alice.propose(c)))
      console.log(`50 concurrent proposals of ${amount}: ${Date.now() - t0} ms`)
      const ids = new Set(replies.map((r) => (r as { held_id: string }).held_id))
      expect(ids.size).toBe(1)
      const statuses = new Set(replies.map((r) => r.status))
      expect(statuses).toEqual(new Set([amount === 300 ? 200 : 202]))
      expect(bank.effects - effects).toBe(amount === 300 ? 1 : 0)
      const events = await eventsOf(kernelConn, [...ids][0]!)
      expect(events.filter((e) => e.type === "call.proposed")).toHaveLength(1)
      expect(events.filter((e) => e.type === "effect.dispatched").length).toBeLessThanOrEqual(1)
    }
  })

  it("an edit while held is a new generation; after dispatch a changed proposal is 409", async () => {
    const c = call({ from: "edit-a", to: "edit-b", amount: 2000 })
    const first = await alice.propose(c)
    expect(first).toMatchObject({ status: 202, generation: 1 })
    const edited = await alice.propose({ ...c, args: { from: "edit-a", to: "edit-b", amount: 2500 } })
    expect(edited).toMatchObject({ status: 202, generation: 2, held_id: (first as { held_id: string }).held_id })
    const small = call({ from: "edit-c", to: "edit-d", amount: 10 })
    expect(await alice.propose(small)).toMatchObject({ status: 200 })
    expect(await alice.propose({ ...small, args: { from: "edit-c", to: "edit-d", amount: 11 } })).toMatchObject({ status: 409, error: { code: "already_dispatched" } })
    expect(bank.balance("edit-c")).toBe(9990)
  })

  it("malformed, oversized, unsigned, badly signed and wrong-op requests get the documented error and leave no event", async () => {
    const before = await eventCount(kernelConn)
    const key = devKeyPair("agent:alice").secretKey
    const good = { op: "propose", principal: "agent:alice", session_id: "s-bad", turn_id: "t1", call_id: "bad1", tool: "money_transfer", args: { from: "x", to: "y", amount: 1 }, nonce: "bad-nonce-1", expires_at: new Date(Date.now() + 300_000).toISOString() }
    const raw = (body: unknown) => alice.request<Record<string, unknown>>(Subjects.propose, body)

    expect(await raw(new TextEncoder().encode("{not json"))).toMatchObject({ status: 400, error: { code: "invalid_request" } })
    expect(await raw(signEnvelope({ ...good, args: "nope" }, key))).toMatchObject({ status: 400, error: { code: "invalid_request", path: "payload.args" } })
    expect(await raw(signEnvelope({ ...good, session_id: "has space" }, key))).toMatchObject({ status: 400, error: { path: "payload.session_id" } })
    const { call_id: _omit, ...missing } = good
    expect(await raw(signEnvelope(missing, key))).toMatchObject({ status: 400, error: { path: "payload.call_id" } })
    const big = new TextEncoder().encode(JSON.stringify(signEnvelope({ ...good, args: { blob: "x".repeat(1024 * 1024 + 10) } }, key)))
    expect(await raw(big)).toMatchObject({ status: 400, error: { code: "invalid_request" } })
    expect(await raw(new TextEncoder().encode("[".repeat(5000) + "]".repeat(5000)))).toMatchObject({ status: 400 })
    expect(await raw({ payload: good })).toMatchObject({ status: 401, error: { code: "unauthenticated" } })
    const forged = signEnvelope(good, key)
    expect(await raw({ ...forged, payload: { ...good, args: { ...good.args, amount: 2 } } })).toMatchObject({ status: 401 })
    const otherKey = nacl.sign.keyPair().secretKey
    expect(await raw(signEnvelope(good, otherKey))).toMatchObject({ status: 401, error: { code: "unauthenticated" } })
    expect(await raw(signEnvelope({ ...good, op: "attest" }, key))).toMatchObject({ status: 401 })
    expect(await raw(signEnvelope({ ...good, principal: "agent:nobody" }, key))).toMatchObject({ status: 401 })
    expect(await raw(signEnvelope({ ...good, preferences: { require_witness: false, allow_everything: true } }, key))).toMatchObject({ status: 400, error: { path: "payload.preferences.allow_everything" } })

    expect(await eventCount(kernelConn)).toBe(before)
    const missingHeld = await alice.get(heldIdOf("agent:alice", "s-bad", "t1", "bad1"))
    expect(missingHeld.status).toBe(404)
    expect(await alice.request(Subjects.get, { held_id: "nope" })).toMatchObject({ status: 400, error: { path: "held_id" } })
  })

  it("restarting the kernel keeps every held call", async () => {
    const ids: Array<string> = []
    for (let i = 0; i < 5; i++) {
      const r = await alice.propose(call({ from: `restart-${i}`, to: "restart-b", amount: 1500 + i }))
      expect(r.status).toBe(202)
      ids.push((r as { held_id: string }).held_id)
    }
    await kernel.stop()
    kernel = await startKernel(nats.servers, profiles)
    for (const id of ids) {
      const got = await alice.get(id)
      expect(got).toMatchObject({ status: 200, held: { held_id: id, lifecycle: "open", readiness: "unsatisfied", execution: "none" } })
    }
  })
})
