import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventually } from "../support/Stream.js"

// Routes only narrow: a per-call `witness_route` picks among the witnesses the contract admits.
// The attacker holds agent:bob's and agent:mallory's keys and the shared agent and witness users.
const bobLayer: Profile = { name: "bob-prefs", layer: "user", preferences: { "agent:bob": { always_witness: ["money_*"] } } }

let nats: TestNats
let kernel: InProcessKernel
let bank: DemoBank
const conns: NatsConnection[] = []
let bob: WitnessClient
let mallory: WitnessClient
let carol: WitnessClient
let dave: WitnessClient

type Held = { status: number; held_id: string; call_digest: string; generation: number; witness_request: { contract: Record<string, unknown>; contract_digest: string } }
let n = 0
const transfer = (amount: number, preferences: Record<string, unknown>) =>
  bob.propose({ session_id: "s-routes", turn_id: "t1", call_id: `rt${++n}`, tool: "money_transfer", args: { from: `route-${n}`, to: "shop", amount }, preferences: preferences as never }) as Promise<Held>
const approve = (w: WitnessClient, h: Held, klass: string) =>
  w.attest({ held_id: h.held_id, class: klass, decision: "approve", generation: h.generation, call_digest: h.call_digest, contract_digest: h.witness_request.contract_digest })

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [testProfile(), bobLayer])
  const [agentConn, witnessConn, toolConn] = await Promise.all((["agent", "witness", "bank"] as const).map((r) => connectAs(nats.servers, r)))
  conns.push(agentConn!, witnessConn!, toolConn!)
  bank = new DemoBank().serve(toolConn!)
  bob = clientFor(agentConn!, "agent:bob")
  mallory = clientFor(witnessConn!, "agent:mallory")
  carol = clientFor(witnessConn!, "user:carol")
  dave = clientFor(witnessConn!, "user:dave")
}, 60_000)

afterAll(async () => {
  bank?.stop()
  await kernel?.stop()
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
})

describe("witness routes only narrow", () => {
  it("a route naming the proposer's own agent does not replace {class: human}: the rule stays unsatisfiable, the call is denied and nothing runs", async () => {
    const h = await transfer(10, { witness_route: { principal: "agent:mallory" } })
    // The contract keeps its rule; a route admitting only a principal without class human leaves no
    // witness who could satisfy it, so the call ends denied at once instead of waiting for mallory.
    expect(h).toMatchObject({ status: 403, outcome: "denied", reasons: [{ by: "kernel", reason: "no registered witnesses can satisfy the witness rule" }] })
    expect(bank.effects).toBe(0)
  })

  it("a route picks among the admitted witnesses: only the routed human's approval counts", async () => {
    const h = await transfer(11, { witness_route: { principal: "user:dave" } })
    expect(await approve(carol, h, "human")).toMatchObject({ status: 422, disposition: "invalid" })
    expect((await bob.get(h.held_id)).held).toMatchObject({ lifecycle: "open", readiness: "unsatisfied" })
    expect(await approve(dave, h, "human")).toMatchObject({ status: 202, disposition: "accepted" })
    await eventually(async () => (await bob.get(h.held_id)).held?.["lifecycle"] === "completed")
    expect(bank.effects).toBe(1)
  })
})
