import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { jcsDigest } from "../../runtime/schema/Canonical.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { EchoTool } from "../support/EchoTool.js"
import { pinOf } from "../support/Pins.js"
import { applyPolicyWitnessed } from "../support/PolicyChange.js"
import { eventsOf, eventually } from "../support/Stream.js"

// What is signed is what was shown: when a policy change makes a transform produce another
// canonical call under the same contract, the held call is presented again as a new generation.
const twoHumans = { rule: { class: "human", count: 2 }, summary: "two humans approve" }
const rule = { amount_field: "amount", witness_above: 1000, contract: twoHumans }
const withAlias = (target: string): Profile =>
  testProfile({
    rules: {},
    grants: { "agent:alice": ["pay", "money_transfer", "wire_transfer"] },
    plugins: [
      pinOf("tool-alias", { stages: ["transform"], config: { aliases: { pay: target } } }),
      pinOf("spend-limit", { stages: ["adjudicate"], config: { rules: { money_transfer: rule, wire_transfer: rule } } })
    ]
  })

let nats: TestNats
let kernel: InProcessKernel
let tools: EchoTool
const conns: NatsConnection[] = []
let alice: WitnessClient
let carol: WitnessClient
let dave: WitnessClient
let erin: WitnessClient
let root: WitnessClient
let ops: WitnessClient
let kernelConn: NatsConnection

type Held = { status: number; held_id: string; generation: number; call_digest: string; witness_request: { contract_digest: string; presentation: Record<string, unknown>; presentation_digest?: string } }
/** Approves exactly the generation and digests of a `held.get` view. */
const approve = (w: WitnessClient, h: Record<string, unknown>) =>
  w.attest({ held_id: String(h["held_id"]), class: "human", decision: "approve", generation: Number(h["generation"]), call_digest: String(h["call_digest"]), contract_digest: String(h["contract_digest"]) })

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [withAlias("money_transfer")])
  const [agentConn, witnessConn, toolConn, kConn] = await Promise.all((["agent", "witness", "tool", "kernel"] as const).map((r) => connectAs(nats.servers, r)))
  conns.push(agentConn!, witnessConn!, toolConn!, kConn!)
  kernelConn = kConn!
  tools = new EchoTool(["money_transfer", "wire_transfer"]).serve(toolConn!)
  alice = clientFor(agentConn!, "agent:alice")
  carol = clientFor(witnessConn!, "user:carol")
  dave = clientFor(witnessConn!, "user:dave")
  erin = clientFor(witnessConn!, "user:erin")
  root = clientFor(kernelConn, "admin:root")
  ops = clientFor(witnessConn!, "admin:ops")
}, 60_000)

afterAll(async () => {
  await kernel?.stop()
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
})

describe("a changed canonical call is presented again", () => {
  it("after a policy change re-routes the alias, witnesses are shown the new call as a new generation and the old approval does not count", async () => {
    const call = { session_id: "s-rep", turn_id: "t1", call_id: "rep1", tool: "pay", args: { from: "rep-a", to: "shop", amount: 5_000 } as never }
    const h = (await alice.propose(call)) as Held
    expect(h).toMatchObject({ status: 202, generation: 1, witness_request: { presentation: { tool: "money_transfer", generation: 1 } } })
    const before = (await carol.get(h.held_id)).held!
    expect(await approve(carol, before)).toMatchObject({ disposition: "accepted" })

    // The organization re-points the alias: same contract, another canonical call.
    const applied = await applyPolicyWitnessed(root, ops, withAlias("wire_transfer"))
    expect(applied).toMatchObject({ status: 200 })
    // Wait until the held call was decided again under the new policy.
    const now = await eventually(async () => {
      const held = (await carol.get(h.held_id)).held!
      return held["policy_epoch_checked"] === applied.policy_epoch && held
    })
    const request = now["witness_request"] as Held["witness_request"]
    // What witnesses see is the call that would run, under the new generation.
    expect(now).toMatchObject({ generation: 2, tool: "wire_transfer" })
    expect(request.presentation).toMatchObject({ tool: "wire_transfer", generation: 2, call_digest: now.call_digest })
    expect(request.presentation_digest).toBe(jcsDigest(request.presentation))
    expect(now.contract_digest).toBe(before.contract_digest)
    const events = await eventsOf(kernelConn, h.held_id)
    expect(events.filter((e) => e.type === "call.represented")).toMatchObject([{ generation: 2, from_call_digest: before.call_digest, call_digest: now.call_digest }])
    expect(events.filter((e) => e.type === "call.held").map((e) => e.generation)).toEqual([1, 2])

    // An approval of what carol saw before is stale; hers counted for generation 1 only.
    expect(await approve(carol, before)).toMatchObject({ status: 409, disposition: "stale" })
    expect(await approve(dave, now)).toMatchObject({ disposition: "accepted" })
    expect((await alice.get(h.held_id)).held).toMatchObject({ lifecycle: "open", readiness: "unsatisfied" })
    expect(await approve(erin, now)).toMatchObject({ disposition: "accepted" })
    await eventually(async () => (await alice.get(h.held_id)).held?.["lifecycle"] === "completed")
    expect([...tools.applied.values()]).toEqual([{ tool: "wire_transfer", args: { from: "rep-a", to: "shop", amount: 5_000 } }])
  })

  it("the agent's edit may name the generation it saw before the re-presentation", async () => {
    const call = { session_id: "s-rep", turn_id: "t1", call_id: "rep2", tool: "pay", args: { from: "rep-b", to: "shop", amount: 6_000 } as never }
    const h = (await alice.propose(call)) as Held
    expect(h).toMatchObject({ status: 202, generation: 1 })
    const applied = await applyPolicyWitnessed(root, ops, withAlias("money_transfer"))
    await eventually(async () => (await alice.get(h.held_id)).held?.["policy_epoch_checked"] === applied.policy_epoch)
    expect((await alice.get(h.held_id)).held).toMatchObject({ generation: 2 })
    const edited = (await alice.propose({ ...call, args: { from: "rep-b", to: "shop", amount: 6_500 } as never, supersedes: 1 })) as Held
    expect(edited).toMatchObject({ status: 202, generation: 3, witness_request: { presentation: { tool: "money_transfer", args: { amount: 6_500 } } } })
  })
})
