import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { randomBytes } from "node:crypto"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { continuationOf, type WitnessClient } from "../../runtime/client/Client.js"
import { resumeHeld } from "../../runtime/integrations/GovernedCall.js"
import { sha256Hex } from "../../runtime/schema/Canonical.js"
import { MaxContinuationBytes } from "../../runtime/schema/Continuation.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventually } from "../support/Stream.js"
import { failedChecks, replayAs } from "../audit/support.js"

// A kernel-kept continuation: bound by the signed proposal's digest, kept by digest in the object
// store, returned with the delivery. The attacker holds agent:alice's key and the shared agent user.
let nats: TestNats
let kernel: InProcessKernel
let bank: DemoBank
const conns: NatsConnection[] = []
let alice: WitnessClient
let carol: WitnessClient

let n = 0
const call = (amount: number) => ({ session_id: "s-cont", turn_id: "t1", call_id: `kc${++n}`, tool: "money_transfer", args: { from: `cont-${n}`, to: "shop", amount } })
/** A signed proposal sent with whatever body the attacker chooses beside the envelope. */
const rawPropose = (payload: Record<string, unknown>, extra: Record<string, unknown>) =>
  alice.request<{ status: number; error?: { path?: string; message: string } }>(Subjects.propose, {
    ...alice.sign({ op: "propose", principal: "agent:alice", nonce: randomBytes(12).toString("hex"), expires_at: new Date(Date.now() + 60_000).toISOString(), ...payload }),
    ...extra
  })
const b64 = (b: Uint8Array) => Buffer.from(b).toString("base64")

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [testProfile()])
  const [agentConn, witnessConn, toolConn] = await Promise.all((["agent", "witness", "bank"] as const).map((r) => connectAs(nats.servers, r)))
  conns.push(agentConn!, witnessConn!, toolConn!)
  bank = new DemoBank().serve(toolConn!)
  alice = clientFor(agentConn!, "agent:alice")
  carol = clientFor(witnessConn!, "user:carol")
}, 60_000)

afterAll(async () => {
  bank?.stop()
  await kernel?.stop()
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
})

describe("kernel-kept continuation", () => {
  it("attacker: a continuation over the bound is refused naming the field, and nothing is recorded", async () => {
    const big = new Uint8Array(randomBytes(MaxContinuationBytes + 1))
    const c = call(2000)
    const r = await rawPropose({ ...c, continuation_digest: sha256Hex(big) }, { continuation: b64(big) })
    expect(r).toMatchObject({ status: 400, error: { path: "continuation", message: `continuation is ${MaxContinuationBytes + 1} bytes, over the bound of ${MaxContinuationBytes}` } })
    expect((await alice.propose({ ...c, continuation: big })).status).toBe(400)
    expect(bank.effects).toBe(0)
  })

  it("attacker: bytes swapped after signing, a digest without bytes, and bytes the signature does not bind are each refused", async () => {
    const signed = new Uint8Array(randomBytes(64))
    const swapped = new Uint8Array(randomBytes(64))
    expect(await rawPropose({ ...call(2000), continuation_digest: sha256Hex(signed) }, { continuation: b64(swapped) })).toMatchObject({ status: 400, error: { path: "continuation", message: expect.stringContaining("not the signed continuation_digest") } })
    expect(await rawPropose({ ...call(2000), continuation_digest: sha256Hex(signed) }, {})).toMatchObject({ status: 400, error: { path: "continuation" } })
    expect(await rawPropose(call(2000), { continuation: b64(signed) })).toMatchObject({ status: 400, error: { path: "continuation", message: expect.stringContaining("must be bound") } })
    expect(await rawPropose({ ...call(2000), continuation_digest: "not-a-digest" }, {})).toMatchObject({ status: 400, error: { path: "payload.continuation_digest" } })
  })

  it("a held call's continuation is kept by digest and returned with the delivery, also to an app resuming by held id", async () => {
    const checkpoint = new TextEncoder().encode(JSON.stringify({ messages: ["transfer 2,500 to shop?"], step: 3 }))
    const held = (await alice.propose({ ...call(2500), continuation: checkpoint })) as { status: number; held_id: string; call_digest: string; generation: number; witness_request: { contract_digest: string } }
    expect(held.status).toBe(202)
    expect((await alice.get(held.held_id)).held).toMatchObject({ continuation_digest: sha256Hex(checkpoint) })
    expect(await carol.attest({ held_id: held.held_id, class: "human", decision: "approve", generation: held.generation, call_digest: held.call_digest, contract_digest: held.witness_request.contract_digest })).toMatchObject({ status: 202 })
    const d = await alice.result(held.held_id, { ack: false })
    expect(d).toMatchObject({ outcome: "completed", continuation: { digest: sha256Hex(checkpoint), data: b64(checkpoint) } })
    expect(continuationOf(d)).toEqual(checkpoint)
    expect(continuationOf({ continuation: { digest: sha256Hex(checkpoint), data: b64(new Uint8Array([1, 2, 3])) } })).toBeNull()
    const resumed = await resumeHeld(alice, held.held_id, { sessionId: "s-cont" })
    expect(resumed).toMatchObject({ status: "completed", continuation: checkpoint })
    await eventually(async () => (await alice.get(held.held_id)).held?.["continuation_delivery"] === "acknowledged")
    expect(bank.effects).toBe(1)
  })

  it("the audit finds every recorded continuation digest bound by its signed proposal", async () => {
    expect(failedChecks(await replayAs(nats.servers, "auditor"))).toEqual([])
  })
})
