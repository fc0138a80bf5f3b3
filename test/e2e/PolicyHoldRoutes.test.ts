import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, principal, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventually } from "../support/Stream.js"
import { checkOf, failedChecks, replayAs } from "../audit/support.js"

// A user's witness route on a hold policy caused: it picks among the witnesses the contract
// admits, and is ignored (with the reason recorded) when those witnesses cannot meet it alone.
// The attacker holds agent:alice's and agent:mallory's keys and the shared agent and witness users.
const base = testProfile()
const org = testProfile({
  principals: { ...base.principals, ...Object.fromEntries([principal("ci:runner", "ci")]) },
  rules: {
    money_transfer: { amount_field: "amount", witness_above: 1000, deny_above: 100_000, contract: { rule: { any: [{ class: "human" }, { class: "ci" }] }, veto: ["compliance"] } }
  }
})
// Bob's user layer: "use CI rather than a reviewer" for his calls.
const bobLayer: Profile = { name: "bob-route", layer: "user", preferences: { "agent:bob": { witness_route: { class: "ci" } } } }

let nats: TestNats
let kernel: InProcessKernel
let bank: DemoBank
const conns: NatsConnection[] = []
let alice: WitnessClient
let bob: WitnessClient
let mallory: WitnessClient
let carol: WitnessClient
let ci: WitnessClient

type Held = { status: number; held_id: string; call_digest: string; generation: number; witness_request: { contract: Record<string, unknown>; contract_digest: string } }
let n = 0
const transfer = (who: WitnessClient, amount: number, preferences?: Record<string, unknown>) =>
  who.propose({
    session_id: "s-policy-routes",
    turn_id: "t1",
    call_id: `pr${++n}`,
    tool: "money_transfer",
    args: { from: `policy-route-${n}`, to: "shop", amount },
    ...(preferences ? { preferences: preferences as never } : {})
  }) as Promise<Held>
const approve = (w: WitnessClient, h: Held, klass: string) =>
  w.attest({ held_id: h.held_id, class: klass, decision: "approve", generation: h.generation, call_digest: h.call_digest, contract_digest: h.witness_request.contract_digest })
const reasonsOf = async (who: WitnessClient, h: Held) => (await who.get(h.held_id)).held?.["reasons"]
const lifecycle = async (h: Held, who: WitnessClient = alice) => (await who.get(h.held_id)).held?.["lifecycle"]

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [org, bobLayer])
  const [agentConn, witnessConn, toolConn] = await Promise.all((["agent", "witness", "bank"] as const).map((r) => connectAs(nats.servers, r)))
  conns.push(agentConn!, witnessConn!, toolConn!)
  bank = new DemoBank().serve(toolConn!)
  alice = clientFor(agentConn!, "agent:alice")
  bob = clientFor(agentConn!, "agent:bob")
  mallory = clientFor(witnessConn!, "agent:mallory")
  carol = clientFor(witnessConn!, "user:carol")
  ci = clientFor(witnessConn!, "ci:runner")
}, 60_000)

afterAll(async () => {
  bank?.stop()
  await kernel?.stop()
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
})

describe("user-routed policy holds", () => {
  it("attacker: a per-call route to a witness outside the contract is ignored with its reason; mallory's approval never counts and the contract's witnesses still release the call", async () => {
    const h = await transfer(alice, 2000, { witness_route: { principal: "agent:mallory" } })
    expect(h.status).toBe(202)
    expect(h.witness_request.contract).not.toHaveProperty("route")
    expect(await reasonsOf(alice, h)).toContainEqual({ by: "preferences", reason: expect.stringMatching(/^witness route \{"principal":"agent:mallory"\} ignored: the witnesses it admits \(agent:mallory\) cannot meet/) })
    const m = await approve(mallory, h, "agent")
    expect(m.status).not.toBe(202)
    expect((await alice.get(h.held_id)).held).toMatchObject({ lifecycle: "open", readiness: "unsatisfied" })
    expect(bank.effects).toBe(0)
    expect(await approve(carol, h, "human")).toMatchObject({ status: 202, disposition: "accepted" })
    await eventually(async () => (await lifecycle(h)) === "completed")
    expect(bank.effects).toBe(1)
  })

  it("attacker: a route naming no registered witness is ignored, never a denial or a widening", async () => {
    const h = await transfer(alice, 2001, { witness_route: { principal: "user:nobody" } })
    expect(h.status).toBe(202)
    expect(await reasonsOf(alice, h)).toContainEqual({ by: "preferences", reason: expect.stringContaining("it admits no registered witness") })
    expect(h.witness_request.contract).toMatchObject({ rule: { any: [{ class: "human" }, { class: "ci" }] } })
    expect(h.witness_request.contract).not.toHaveProperty("route")
    await alice.cancel(h.held_id)
  })

  it("a user layer's route within the contract narrows who is asked: CI's approval releases the call, a human's is refused as off the route", async () => {
    const before = bank.effects
    const h = await transfer(bob, 2002)
    expect(h.status).toBe(202)
    expect(h.witness_request.contract).toMatchObject({ rule: { any: [{ class: "human" }, { class: "ci" }] }, route: { class: "ci" } })
    expect(await reasonsOf(bob, h)).toContainEqual({ by: "preferences", reason: 'witness route {"class":"ci"} applied: only ci:runner are asked and counted' })
    expect(await approve(carol, h, "human")).toMatchObject({ status: 422, disposition: "invalid" })
    expect((await bob.get(h.held_id)).held).toMatchObject({ lifecycle: "open" })
    expect(await approve(ci, h, "ci")).toMatchObject({ status: 202, disposition: "accepted" })
    await eventually(async () => (await lifecycle(h, bob)) === "completed")
    expect(bank.effects).toBe(before + 1)
  })

  it("the audit re-derives every route choice from the epoch's layers and registry", async () => {
    const report = await replayAs(nats.servers, "auditor")
    expect(failedChecks(report)).toEqual([])
    expect(checkOf(report, "policy-route")).toMatchObject({ status: "passed", checked: 3 })
  })
})
