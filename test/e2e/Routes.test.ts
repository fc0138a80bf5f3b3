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
  const [agentConn, witnessConn, toolConn] = await Promise.all((["agent", "witness", "tool"] as const).map((r) => connectAs(nats.servers, r)))
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
  it("a route naming the proposer's own agent does not replace {class: human}: that agent's approval is refused and nothing runs", async () => {
    const h = await transfer(10, { witness_route: { principal: "agent:mallory" } })
    expect(h).toMatchObject({ status: 202 })
    expect(await approve(mallory, h, "agent")).toMatchObject({ status: 422, disposition: "invalid" })
    expect((await bob.get(h.held_id)).held).toMatchObject({ lifecycle: "open", readiness: "unsatisfied", execution: "none" })
    expect(bank.effects).toBe(0)
    // The contract keeps its rule; the route only says whose approvals may count.
    expect(h.witness_request.contract).toMatchObject({ rule: { class: "human" }, route: { principal: "agent:mallory" } })
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
