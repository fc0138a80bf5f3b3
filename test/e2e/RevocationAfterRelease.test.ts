import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection, Subscription } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { describeHeld } from "../../runtime/cli/HeldCommands.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventually } from "../support/Stream.js"
import { failedChecks, replayAs } from "../audit/support.js"

// A revocation after release: recorded, told to the proposer's session and the routes, listed by
// held.get and `wk held show`. The attacker holds agent:mallory's and user:dave's keys and the
// shared agent and witness users.
let nats: TestNats
let kernel: InProcessKernel
let bank: DemoBank
const conns: NatsConnection[] = []
let alice: WitnessClient
let carol: WitnessClient
let dave: WitnessClient
let mallory: WitnessClient
let sessionNotices: Subscription
let routeNotices: Subscription
const seen = { session: [] as Array<Record<string, unknown>>, route: [] as Array<Record<string, unknown>> }

type Held = { status: number; held_id: string; call_digest: string; generation: number; witness_request: { contract_digest: string } }
const bound = (h: Held) => ({ held_id: h.held_id, generation: h.generation, call_digest: h.call_digest, contract_digest: h.witness_request.contract_digest })

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [testProfile()])
  const [agentConn, witnessConn, toolConn, kernelConn] = await Promise.all((["agent", "witness", "bank", "kernel"] as const).map((r) => connectAs(nats.servers, r)))
  conns.push(agentConn!, witnessConn!, toolConn!, kernelConn!)
  bank = new DemoBank().serve(toolConn!)
  alice = clientFor(agentConn!, "agent:alice")
  carol = clientFor(witnessConn!, "user:carol")
  dave = clientFor(witnessConn!, "user:dave")
  mallory = clientFor(witnessConn!, "agent:mallory")
  sessionNotices = agentConn!.subscribe(Subjects.sessionRevocations("s-revoke"))
  routeNotices = kernelConn!.subscribe(Subjects.witnessRevocations("*"))
  void (async () => { for await (const m of sessionNotices) seen.session.push(m.json()) })()
  void (async () => { for await (const m of routeNotices) seen.route.push(m.json()) })()
}, 60_000)

afterAll(async () => {
  bank?.stop()
  await kernel?.stop()
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
})

describe("revocation after release", () => {
  let h: Held

  it("a call released by carol's approval runs once", async () => {
    h = (await alice.propose({ session_id: "s-revoke", turn_id: "t1", call_id: "r1", tool: "money_transfer", args: { from: "rev-1", to: "shop", amount: 2000 } })) as Held
    expect(h.status).toBe(202)
    expect(await carol.attest({ ...bound(h), class: "human", decision: "approve" })).toMatchObject({ status: 202, disposition: "accepted" })
    await eventually(async () => (await alice.get(h.held_id)).held?.["lifecycle"] === "completed")
    expect(bank.effects).toBe(1)
  })

  it("attacker: a revoke by witnesses that never approved (dave, mallory) is not a revocation after release and tells nobody", async () => {
    expect(await dave.attest({ ...bound(h), class: "human", decision: "revoke" })).toMatchObject({ status: 409, disposition: "stale" })
    const m = await mallory.attest({ ...bound(h), class: "agent", decision: "revoke" })
    expect(m).not.toHaveProperty("revoked_after_release")
    expect((await alice.get(h.held_id)).held).not.toHaveProperty("revoked_after_release")
  })

  it("carol's revoke after release is recorded, her reply says so, and the session and routes are told once", async () => {
    const r = await carol.attest({ ...bound(h), class: "human", decision: "revoke", reason: "wrong beneficiary" })
    expect(r).toMatchObject({ status: 409, disposition: "stale", revoked_after_release: true, notified: true })
    await eventually(async () => seen.session.length === 1 && seen.route.length === 1)
    expect(seen.session[0]).toMatchObject({ type: "revocation.after_release", held_id: h.held_id, session_id: "s-revoke", witness: "user:carol", class: "human", outcome: "completed" })
    expect(seen.route[0]).toEqual(seen.session[0])
    const held = (await alice.get(h.held_id)).held!
    expect(held["revoked_after_release"]).toEqual([expect.objectContaining({ witness: "user:carol", class: "human", generation: h.generation, call_digest: h.call_digest })])
    expect(describeHeld(held)).toMatch(/^REVOKED {5}user:carol \(human\) withdrew its approval after release/m)
    expect(bank.effects).toBe(1)
  })

  it("the audit re-folds the revocation with the kernel's reducer and finds nothing broken", async () => {
    expect(failedChecks(await replayAs(nats.servers, "auditor"))).toEqual([])
  })
})
