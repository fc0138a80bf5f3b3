import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import type { Envelope } from "../../runtime/schema/Envelope.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { applyPolicyWitnessed } from "../support/PolicyChange.js"

// A `policy.apply` envelope cannot be replayed. The admin signs it; the attacker has captured it
// and can send it again on the admin subject. Replayed, a narrowing would silently revert a
// change made since (here: the witnessed widening back to the organization's threshold).
let nats: TestNats
let kernel: InProcessKernel
let bank: DemoBank
const conns: NatsConnection[] = []
let root: WitnessClient
let ops: WitnessClient
let alice: WitnessClient
let attacker: NatsConnection

const enc = new TextEncoder()
const send = async (env: Envelope) => (await attacker.request(Subjects.policyApply, enc.encode(JSON.stringify(env)), { timeout: 15_000 })).json<Record<string, unknown>>()
const inMinutes = (m: number) => new Date(Date.now() + m * 60_000).toISOString()
const withThreshold = (witness_above: number): Profile => {
  const base = testProfile()
  return { ...base, rules: { money_transfer: { ...base.rules!["money_transfer"]!, witness_above } } } as Profile
}
let n = 0
const applyEnvelope = (profile: Profile, extra: Record<string, unknown> = {}) =>
  root.sign({ op: "policy.apply", profile, nonce: `apply-nonce-${++n}`, expires_at: inMinutes(5), ...extra } as never)
const transfer = (amount: number) => alice.propose({ session_id: "s-apply-replay", turn_id: "t1", call_id: `c${++n}`, tool: "money_transfer", args: { from: `acct-${n}`, to: "shop", amount } })

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [testProfile()])
  const [kConn, wConn, aConn, tConn] = await Promise.all((["kernel", "witness", "agent", "bank"] as const).map((r) => connectAs(nats.servers, r)))
  conns.push(kConn!, wConn!, aConn!, tConn!)
  root = clientFor(kConn!, "admin:root")
  ops = clientFor(wConn!, "admin:ops")
  alice = clientFor(aConn!, "agent:alice")
  bank = new DemoBank().serve(tConn!)
  attacker = kConn!
}, 60_000)

afterAll(async () => {
  bank?.stop()
  await kernel?.stop()
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
})

describe("policy.apply envelopes cannot be replayed", () => {
  it("a captured narrowing sent again after a later change is a duplicate: nothing reverts, the epoch stays", async () => {
    const narrowing = applyEnvelope(withThreshold(500))
    const applied = await send(narrowing)
    expect(applied).toMatchObject({ status: 200 })
    const narrowedEpoch = applied["policy_epoch"] as number
    expect(await transfer(700)).toMatchObject({ status: 202 })
    // The organization widens back to 1000, witnessed by the second admin.
    const widened = await applyPolicyWitnessed(root, ops, withThreshold(1000))
    expect(widened.status).toBe(200)
    expect(await transfer(700)).toMatchObject({ status: 200, outcome: "completed" })
    for (let i = 0; i < 3; i++) expect(await send(narrowing)).toMatchObject({ status: 200, duplicate: true, policy_epoch: narrowedEpoch })
    // The widening stands.
    expect(await transfer(700)).toMatchObject({ status: 200, outcome: "completed" })
  })

  it("an envelope without nonce or expiry (a client written before them) cannot be replayed either", async () => {
    const legacy = root.sign({ op: "policy.apply", profile: withThreshold(600) } as never)
    const applied = await send(legacy)
    expect(applied).toMatchObject({ status: 200 })
    const epoch = applied["policy_epoch"] as number
    // (another threshold than the first test's widening: the same change is the same held call)
    const widened = await applyPolicyWitnessed(root, ops, withThreshold(1100))
    expect(widened.status).toBe(200)
    expect(await send(legacy)).toMatchObject({ status: 200, duplicate: true, policy_epoch: epoch })
    expect(await transfer(700)).toMatchObject({ status: 200, outcome: "completed" })
  })

  it("an expired envelope is refused, and so is one that would stay valid too long", async () => {
    expect(await send(applyEnvelope(withThreshold(400), { expires_at: inMinutes(-1) }))).toMatchObject({ status: 409, error: { code: "envelope_expired", path: "payload.expires_at" } })
    expect(await send(applyEnvelope(withThreshold(400), { expires_at: inMinutes(60 * 24) }))).toMatchObject({ status: 400, error: { path: "payload.expires_at" } })
    expect(await transfer(700)).toMatchObject({ status: 200, outcome: "completed" })
  })

  it("the client signs every apply with a fresh nonce and a short expiry", async () => {
    const seen: Array<Record<string, unknown>> = []
    const original = root.request.bind(root)
    root.request = (async (subject: string, body: unknown, timeoutMs?: number) => {
      if (subject === Subjects.policyApply) seen.push((body as Envelope).payload as Record<string, unknown>)
      return original(subject, body, timeoutMs)
    }) as typeof root.request
    await root.applyPolicy(withThreshold(900) as never)
    await root.applyPolicy(withThreshold(900) as never)
    root.request = original
    expect(seen).toHaveLength(2)
    expect(seen[0]!["nonce"]).toEqual(expect.any(String))
    expect(seen[0]!["nonce"]).not.toEqual(seen[1]!["nonce"])
    expect(Date.parse(String(seen[0]!["expires_at"]))).toBeGreaterThan(Date.now())
  })
})
