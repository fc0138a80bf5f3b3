import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Effect } from "effect"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { presentationDigest } from "../../runtime/schema/Canonical.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import type { Envelope } from "../../runtime/schema/Envelope.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { replayOver } from "../../runtime/audit/Replay.js"
import { startTestNats, Roles, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { applyPolicyWitnessed } from "../support/PolicyChange.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventsOf, eventually } from "../support/Stream.js"
import { softPasskey } from "../support/SoftPasskey.js"

// A person approves with a passkey, against a real nats-server and an in-process kernel: the
// registration is a widening a second admin approves, the approval counts as an ed25519 one
// would, and each refusal the issue names is answered before anything counts.
let nats: TestNats
let kernel: InProcessKernel
let bank: DemoBank
const conns: Array<NatsConnection> = []
let alice: WitnessClient
let carol: WitnessClient
let root: WitnessClient
let ops: WitnessClient
let kernelConn: NatsConnection

const pk = softPasskey({ origin: "http://localhost:8080" })
const base = testProfile()
const withPasskey = (passkeys: ReadonlyArray<typeof pk.entry>): Profile => ({
  ...base,
  principals: { ...base.principals, "user:pat": { keys: [], classes: ["human"], passkeys } }
})

let n = 0
type Held = { status: 202; held_id: string; call_digest: string; generation: number; witness_request: { contract_digest: string; presentation: unknown } }
const hold = async (amount: number): Promise<Held> => {
  const r = await alice.propose({ session_id: "s-passkey", turn_id: "t1", call_id: `p${++n}`, tool: "money_transfer", args: { from: `acct-${n}`, to: "shop", amount } } as never)
  expect(r.status).toBe(202)
  return r as unknown as Held
}
const approval = (h: Held, over: Record<string, unknown> = {}) => ({
  op: "attest",
  principal: "user:pat",
  class: "human",
  held_id: h.held_id,
  generation: h.generation,
  call_digest: h.call_digest,
  contract_digest: h.witness_request.contract_digest,
  presentation_digest: presentationDigest(h.witness_request.presentation),
  decision: "approve",
  nonce: `n-${Math.random().toString(36).slice(2)}`,
  issued_at: new Date().toISOString(),
  expires_at: new Date(Date.now() + 600_000).toISOString(),
  ...over
})
type Answer = { status: number; disposition?: string; error?: { message: string } }
const send = (env: Envelope): Promise<Answer> => carol.request<Answer>(Subjects.attest, env)
const lifecycle = async (id: string) => (await alice.get(id)).held?.["lifecycle"]

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [withPasskey([])])
  const bankConn = await connectAs(nats.servers, "bank")
  bank = new DemoBank().serve(bankConn)
  const [agent, witness, admin] = await Promise.all([connectAs(nats.servers, "agent"), connectAs(nats.servers, "witness"), connectAs(nats.servers, "kernel")])
  kernelConn = admin
  conns.push(bankConn, agent, witness, admin)
  alice = clientFor(agent, "agent:alice")
  carol = clientFor(witness, "user:carol")
  root = clientFor(admin, "admin:root")
  ops = clientFor(admin, "admin:ops")
}, 60_000)

afterAll(async () => {
  await Promise.all(conns.map((c) => c.close()))
  await kernel?.stop()
  await nats?.stop()
})

describe("passkey approvals through the kernel", () => {
  it("before registration a passkey's approval is refused; registering it is a widening a second admin approves", async () => {
    const h = await hold(2500)
    expect(await send(pk.sign(approval(h)))).toMatchObject({ status: 401, error: { message: expect.stringContaining("not registered to principal 'user:pat'") } })
    const alone = (await root.applyPolicy(withPasskey([pk.entry]) as never)) as { status: number; held_id?: string }
    expect(alone.status).toBe(202)
    expect(alone.held_id).toBeDefined()
    await ops.decide(alone.held_id!, "admin")
    await eventually(async () => (await root.get(alone.held_id!)).held?.["lifecycle"] === "completed")
  })

  it("an approval counts exactly as an ed25519 one: the call runs once; the same envelope again is a duplicate", async () => {
    const h = await hold(2500)
    const effects = bank.effects
    const env = pk.sign(approval(h))
    expect(await send(env)).toMatchObject({ status: 202, disposition: "accepted" })
    await eventually(async () => (await lifecycle(h.held_id)) === "completed")
    expect(bank.effects - effects).toBe(1)
    expect(await send(env)).toMatchObject({ status: 200, disposition: "duplicate" })
    const accepted = (await eventsOf(kernelConn, h.held_id)).filter((e) => e.type === "attestation.accepted")
    expect(accepted).toHaveLength(1)
    expect((accepted[0] as { envelope: Envelope }).envelope.webauthn?.credential_id).toBe(pk.entry.id)
    expect(bank.effects - effects).toBe(1)
  })

  it("refused: another origin, a challenge for another generation or presentation, a lowered counter, a replay onto another call", async () => {
    const h = await hold(2500)
    const refused = async (env: Envelope, why: string) => expect(await send(env)).toMatchObject({ status: 401, error: { message: expect.stringContaining(why) } })
    await refused(pk.sign(approval(h), { origin: "http://localhost:9090" }), "made on origin")
    const signed = pk.sign(approval(h))
    await refused({ ...signed, payload: { ...signed.payload, generation: h.generation + 1 } }, "challenge is not the digest of this payload")
    await refused({ ...signed, payload: { ...signed.payload, presentation_digest: "0".repeat(64) } }, "challenge is not the digest of this payload")
    const other = await hold(2600)
    await refused({ ...signed, payload: { ...signed.payload, held_id: other.held_id, call_digest: other.call_digest } }, "challenge is not the digest of this payload")
    await refused(pk.sign(approval(h), { counter: 1 }), "signature counter 1 does not follow")
    await refused(pk.sign(approval(h), { uv: false }), "UV flag")
    expect(await lifecycle(h.held_id)).toBe("open")
    expect((await eventsOf(kernelConn, h.held_id)).filter((e) => e.type.startsWith("attestation."))).toEqual([])
  })

  it("a removed credential: refused", async () => {
    const h = await hold(2500)
    const removed = await applyPolicyWitnessed(root, ops, withPasskey([]))
    expect(removed.status).toBe(200)
    expect(await send(pk.sign(approval(h)))).toMatchObject({ status: 401, error: { message: expect.stringContaining("not registered to principal 'user:pat'") } })
    expect(await lifecycle(h.held_id)).toBe("open")
  })

  it("the audit re-verifies every passkey approval from the stream alone", async () => {
    const report = await Effect.runPromise(replayOver({ servers: nats.servers, ...Roles.auditor }))
    expect(report.checks.filter((c) => c.status === "failed")).toEqual([])
    expect(report.ok).toBe(true)
  })
})
