import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { devKeyPair } from "../../runtime/client/DevKeys.js"
import { signEnvelope } from "../../runtime/schema/EnvelopeSignature.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventsOf } from "../support/Stream.js"

// The attestation forgery matrix: a signed approval altered in any bound field after signing,
// signed with the wrong key, by the proposer, expired, or with a replayed nonce is refused,
// and no tool effect happens.
let nats: TestNats
let kernel: InProcessKernel
let bank: DemoBank
let agentConn: NatsConnection
let witnessConn: NatsConnection
let toolConn: NatsConnection
let kernelConn: NatsConnection
let alice: WitnessClient
let carol: WitnessClient

const profile = testProfile()
type Held = { status: 202; held_id: string; call_digest: string; generation: number; witness_request: { contract_digest: string } }
let n = 0
const propose = async (): Promise<Held> => {
  const r = await alice.propose({ session_id: "s-forgery", turn_id: "t1", call_id: `f${++n}`, tool: "money_transfer", args: { from: `acct-f${n}`, to: "shop", amount: 5000 } } as never)
  expect(r.status).toBe(202)
  return r as Held
}
const approvalOf = (h: Held, nonce: string) => ({
  op: "attest",
  principal: "user:carol",
  class: "human",
  held_id: h.held_id,
  generation: h.generation,
  call_digest: h.call_digest,
  contract_digest: h.witness_request.contract_digest,
  decision: "approve",
  issued_at: new Date(Date.now() - 1000).toISOString(),
  expires_at: new Date(Date.now() + 600_000).toISOString(),
  nonce
})
type Reply = { status: number; disposition?: string; reason?: string; error?: { code: string } }
const send = (body: unknown): Promise<Reply> => carol.request(Subjects.attest, body)

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [profile])
  toolConn = await connectAs(nats.servers, "bank")
  bank = new DemoBank().serve(toolConn)
  agentConn = await connectAs(nats.servers, "agent")
  witnessConn = await connectAs(nats.servers, "witness")
  kernelConn = await connectAs(nats.servers, "kernel")
  alice = clientFor(agentConn, "agent:alice")
  carol = clientFor(witnessConn, "user:carol")
})

afterAll(async () => {
  await kernel?.stop()
  await Promise.all([agentConn, witnessConn, toolConn, kernelConn].map((c) => c?.close()))
  await nats?.dispose()
})

// Each bound field and a changed value for it (applied to the payload after it was signed).
const tamper: Record<string, (v: unknown) => unknown> = {
  held_id: () => "h-forged",
  generation: (v) => (v as number) + 1,
  call_digest: () => "a".repeat(64),
  contract_digest: () => "b".repeat(64),
  decision: () => "reject",
  class: () => "compliance",
  principal: () => "user:dave",
  issued_at: () => new Date(Date.now() - 5000).toISOString(),
  expires_at: () => new Date(Date.now() + 900_000).toISOString(),
  nonce: () => "forged-nonce"
}

describe("attestation forgery matrix", () => {
  it("every bound field altered after signing is refused as unauthenticated (401), writes no event and runs nothing", async () => {
    const h = await propose()
    const before = (await eventsOf(kernelConn, h.held_id)).length
    const effects = bank.effects
    for (const [field, change] of Object.entries(tamper)) {
      const env = signEnvelope(approvalOf(h, `nonce-${field}`), devKeyPair("user:carol").secretKey)
      const forged = { ...env, payload: { ...env.payload, [field]: change(env.payload[field as keyof typeof env.payload]) } }
      const r = await send(forged)
      expect(r.status, `field ${field}`).toBe(401)
      expect(r.error?.code, `field ${field}`).toBe("unauthenticated")
    }
    await new Promise((r) => setTimeout(r, 300))
    expect((await eventsOf(kernelConn, h.held_id)).length).toBe(before)
    expect(bank.effects).toBe(effects)
    expect((await alice.get(h.held_id)).held).toMatchObject({ lifecycle: "open", execution: "none" })
  })

  it("a signature by another principal's key, or a key swapped into the envelope, is refused (401)", async () => {
    const h = await propose()
    const before = (await eventsOf(kernelConn, h.held_id)).length
    const signedByDave = signEnvelope(approvalOf(h, "nonce-wrong-key"), devKeyPair("user:dave").secretKey)
    expect(await send(signedByDave)).toMatchObject({ status: 401, error: { code: "unauthenticated" } })
    const carolEnv = signEnvelope(approvalOf(h, "nonce-swap"), devKeyPair("user:carol").secretKey)
    const daveKey = signEnvelope({ x: 1 }, devKeyPair("user:dave").secretKey).key
    expect(await send({ ...carolEnv, key: daveKey })).toMatchObject({ status: 401 })
    const randomSig = { ...carolEnv, sig: Buffer.alloc(64, 7).toString("base64") }
    expect(await send(randomSig)).toMatchObject({ status: 401 })
    expect((await eventsOf(kernelConn, h.held_id)).length).toBe(before)
  })

  it("the proposer's own key, an expired approval and a replayed nonce are refused (422) and recorded as attestation.rejected; nothing runs", async () => {
    const h = await propose()
    const effects = bank.effects
    const self = await clientFor(witnessConn, "agent:alice").attest({ held_id: h.held_id, generation: h.generation, call_digest: h.call_digest, contract_digest: h.witness_request.contract_digest, class: "agent", decision: "approve" })
    expect(self).toMatchObject({ status: 422, disposition: "invalid" })
    const expired = await send(signEnvelope({ ...approvalOf(h, "nonce-expired"), issued_at: new Date(Date.now() - 120_000).toISOString(), expires_at: new Date(Date.now() - 60_000).toISOString() }, devKeyPair("user:carol").secretKey))
    expect(expired, JSON.stringify(expired)).toMatchObject({ status: 422, disposition: "invalid" })
    expect(expired.reason).toContain("expired")
    // A reject consumes the nonce; the same nonce on an approval is a replay.
    const first = await send(signEnvelope({ ...approvalOf(h, "nonce-replay"), decision: "reject" }, devKeyPair("user:carol").secretKey))
    expect(first.disposition).toBe("accepted")
    const replay = await send(signEnvelope(approvalOf(h, "nonce-replay"), devKeyPair("user:carol").secretKey))
    expect(replay).toMatchObject({ status: 422, disposition: "invalid" })
    expect(replay.reason).toContain("nonce")
    await new Promise((r) => setTimeout(r, 300))
    const rejected = (await eventsOf(kernelConn, h.held_id)).filter((e) => e.type === "attestation.rejected")
    expect(rejected).toHaveLength(3)
    expect(bank.effects).toBe(effects)
  })
  it("a revoked witness is refused: removed from the registry (401), or stripped of its class (422); nothing runs", async () => {
    const h = await propose()
    const effects = bank.effects
    const root = clientFor(kernelConn, "admin:root")
    const { "user:erin": _erin, ...rest } = profile.principals!
    const revoked = { ...profile, principals: { ...rest, "user:dave": { ...rest["user:dave"]!, classes: [] } } }
    expect((await root.applyPolicy(revoked as never)).status).toBe(200)
    const byErin = await send(signEnvelope({ ...approvalOf(h, "nonce-erin"), principal: "user:erin" }, devKeyPair("user:erin").secretKey))
    expect(byErin).toMatchObject({ status: 401, error: { code: "unauthenticated" } })
    const byDave = await send(signEnvelope({ ...approvalOf(h, "nonce-dave"), principal: "user:dave" }, devKeyPair("user:dave").secretKey))
    expect(byDave).toMatchObject({ status: 422, disposition: "invalid" })
    expect(byDave.reason).toContain("not registered with class 'human'")
    await new Promise((r) => setTimeout(r, 300))
    expect(bank.effects).toBe(effects)
    // Erin's request wrote nothing; dave's is recorded as rejected.
    const attestations = (await eventsOf(kernelConn, h.held_id)).filter((e) => e.type.startsWith("attestation."))
    expect(attestations.map((e) => [e.type, (e as { witness?: string }).witness])).toEqual([["attestation.rejected", "user:dave"]])
    expect((await alice.get(h.held_id)).held).toMatchObject({ lifecycle: "open", execution: "none" })
  })
})
