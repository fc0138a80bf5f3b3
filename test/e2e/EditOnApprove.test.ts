import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { signEnvelope } from "../../runtime/schema/EnvelopeSignature.js"
import { devKeyPair } from "../../runtime/client/DevKeys.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventually } from "../support/Stream.js"
import { copyStream, failedChecks, readAll, replayAs, type CopiedMessage } from "../audit/support.js"

// Edit on approve: a witness changes a held call's arguments; the edit is the next generation,
// adjudicated from the start and released only by an approval of the edited digest; the agent
// sees who edited what; the auditor re-judges every edit.
let nats: TestNats
let kernel: InProcessKernel
let bank: DemoBank
let agentConn: NatsConnection
let witnessConn: NatsConnection
let toolConn: NatsConnection
let kernelConn: NatsConnection
let alice: WitnessClient
let carol: WitnessClient
let dave: WitnessClient

let n = 0
const transfer = async (amount: number) => {
  const r = (await alice.propose({ session_id: "s-edit", turn_id: "t1", call_id: `e${++n}`, tool: "money_transfer", args: { from: `edit-${n}`, to: "shop", amount } })) as { status: number; held_id: string; call_digest: string }
  expect(r.status).toBe(202)
  return r
}
const heldOf = async (heldId: string) => (await carol.get(heldId)).held!

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [testProfile()])
  toolConn = await connectAs(nats.servers, "bank")
  bank = new DemoBank().serve(toolConn)
  agentConn = await connectAs(nats.servers, "agent")
  witnessConn = await connectAs(nats.servers, "witness")
  kernelConn = await connectAs(nats.servers, "kernel")
  alice = clientFor(agentConn, "agent:alice")
  carol = clientFor(witnessConn, "user:carol")
  dave = clientFor(witnessConn, "user:dave")
}, 60_000)

afterAll(async () => {
  await kernel?.stop()
  await Promise.all([agentConn, witnessConn, toolConn, kernelConn].map((c) => c?.close()))
  await nats?.dispose()
})

describe("edit on approve", () => {
  it("a witness's edit becomes the next generation; an approval of the old call is stale; the edited call runs once and the agent sees the edit", async () => {
    const h = await transfer(5_000)
    const before = await heldOf(h.held_id)
    // dave signed an approval of what he was shown first, but sends it after carol's edit.
    const late = dave.sign({ op: "attest", principal: "user:dave", class: "human", held_id: h.held_id, generation: before.generation, call_digest: before.call_digest, contract_digest: before.contract_digest, decision: "approve", issued_at: new Date().toISOString(), expires_at: new Date(Date.now() + 600_000).toISOString(), nonce: "late-approval-1" })
    const edited = await carol.edit(h.held_id, "human", { from: "edit-1", to: "shop", amount: 4_000 }, "the invoice says 4,000")
    expect(edited).toMatchObject({ status: 202, disposition: "accepted", generation: 2 })
    expect(edited.call_digest).not.toBe(h.call_digest)

    const after = await heldOf(h.held_id)
    expect(after).toMatchObject({ generation: 2, args: { amount: 4_000 }, lifecycle: "open" })
    expect((await dave.request<{ status: number; disposition: string }>(Subjects.attest, late)).disposition).toBe("stale")
    expect(bank.effects).toBe(0)

    // carol proposed the edited call: her own approval is recorded but releases nothing.
    expect((await carol.decide(h.held_id, "human")).disposition).toBe("accepted")
    expect(await heldOf(h.held_id)).toMatchObject({ generation: 2, lifecycle: "open" })
    expect(bank.effects).toBe(0)
    expect((await dave.decide(h.held_id, "human")).disposition).toBe("accepted")
    const d = await alice.result(h.held_id, { sessionId: "s-edit", timeoutMs: 20_000 })
    expect(d).toMatchObject({ outcome: "completed", edited: { by: "user:carol", class: "human", args: { amount: 4_000 }, from_call_digest: h.call_digest, reason: "the invoice says 4,000" } })
    await eventually(async () => bank.effects === 1)
    expect([...bank.byKey.values()].map((t) => t.amount)).toEqual([4_000])
  })

  it("the proposer cannot edit its own call, an edit to the same arguments is refused, and agents may not send edits", async () => {
    const h = await transfer(6_000)
    const asAlice = clientFor(witnessConn, "agent:alice")
    expect(await asAlice.edit(h.held_id, "agent", { from: "edit-2", to: "shop", amount: 10 })).toMatchObject({ status: 422, reason: "witness is not independent of the proposer" })
    expect(await carol.edit(h.held_id, "human", { from: "edit-2", to: "shop", amount: 6_000 })).toMatchObject({ status: 409, error: { code: "same_call" } })
    await expect(alice.edit(h.held_id, "agent", { from: "edit-2", to: "shop", amount: 10 })).rejects.toThrow()
    expect((await heldOf(h.held_id)).generation).toBe(1)
  })

  it("the auditor re-judges edits: a recorded edit signed by the proposer's key fails the audit", async () => {
    expect(failedChecks(await replayAs(nats.servers, "auditor"))).toEqual([])
    const original = await readAll(kernelConn)
    const forge = (ms: Array<CopiedMessage>) =>
      ms.map((m) => {
        if (m.body["type"] !== "call.edited") return m
        const payload = (m.body["envelope"] as { payload: Record<string, unknown> }).payload
        // The proposer "edits" its own call: a validly signed envelope, but not a witness.
        const envelope = signEnvelope({ ...payload, principal: "agent:alice", class: "agent" }, devKeyPair("agent:alice").secretKey)
        return { ...m, body: { ...m.body, witness: "agent:alice", class: "agent", envelope } }
      })
    const stream = await copyStream(kernelConn, original, forge)
    expect(failedChecks(await replayAs(nats.servers, "kernel", { stream, factsBucket: null }))).toContain("attestation-binding")
  })

  it("attack: compliance:zoe, admitted only as a veto, edits a 2,500 transfer into 900 to her own account -> refused, nothing runs", async () => {
    const zoe = clientFor(witnessConn, "compliance:zoe")
    const h = await transfer(2_500)
    const before = bank.effects
    const r = await zoe.edit(h.held_id, "compliance", { from: "edit-zoe", to: "zoe", amount: 900 })
    expect(r).toMatchObject({ status: 422, reason: expect.stringContaining("only an approver may edit") })
    expect(await heldOf(h.held_id)).toMatchObject({ generation: 1, lifecycle: "open", args: { amount: 2_500 } })
    expect(bank.effects).toBe(before)
  })

  it("attack: carol, a human, edits a 2,500 transfer into 900 (under the threshold) -> the edited call is held for the full contract and never runs on carol alone", async () => {
    const h = await transfer(2_500)
    const before = bank.effects
    const r = await carol.edit(h.held_id, "human", { from: "edit-carol", to: "carol", amount: 900 })
    expect(r).toMatchObject({ status: 202, generation: 2 })
    await eventually(async () => (await heldOf(h.held_id)).verdict === "REQUIRE_WITNESS")
    expect(await heldOf(h.held_id)).toMatchObject({ generation: 2, lifecycle: "open", verdict: "REQUIRE_WITNESS", args: { amount: 900 } })
    expect((await carol.decide(h.held_id, "human")).disposition).toBe("accepted")
    expect(await heldOf(h.held_id)).toMatchObject({ generation: 2, lifecycle: "open" })
    expect(bank.effects).toBe(before)
    // An independent human releases it: exactly the edited digest runs, once.
    expect((await dave.decide(h.held_id, "human")).disposition).toBe("accepted")
    await eventually(async () => bank.effects === before + 1)
    expect([...bank.byKey.values()].map((t) => t.amount)).toContain(900)
  })
})
