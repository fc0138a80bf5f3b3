import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { applyPolicyWitnessed } from "../support/PolicyChange.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { pinOf } from "../support/Pins.js"
import { eventsOf, eventually } from "../support/Stream.js"

// Policy decided by signed WASM plugins pinned in the profile, through the kernel over NATS.
let nats: TestNats
let kernel: InProcessKernel
let bank: DemoBank
let agentConn: NatsConnection
let witnessConn: NatsConnection
let toolConn: NatsConnection
let echoConn: NatsConnection
let kernelConn: NatsConnection
let alice: WitnessClient
let carol: WitnessClient
const Secret = "AKIAABCDEFGHIJKLMNOP"

const rules = { money_transfer: { amount_field: "amount", witness_above: 1000, deny_above: 100_000, contract: { rule: { class: "human" } } } }
const profile = testProfile({
  rules: {},
  grants: { "agent:alice": ["money_transfer", "pay", "leaky_read", "slow_policy_tool"] },
  plugins: [
    pinOf("tool-alias", { stages: ["transform"], config: { aliases: { pay: "money_transfer" } } }),
    pinOf("spend-limit", { stages: ["adjudicate"], config: { rules } }),
    pinOf("secret-scan", { stages: ["admit"] })
  ]
})

let n = 0
const call = (tool: string, args: Record<string, unknown>) => ({ session_id: "s-plugins", turn_id: "t1", call_id: `p${++n}`, tool, args: args as never })

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [profile])
  toolConn = await connectAs(nats.servers, "bank")
  echoConn = await connectAs(nats.servers, "echo")
  bank = new DemoBank().serve(toolConn)
  echoConn.subscribe(Subjects.toolInvoke("leaky_read"), { callback: (_e, m) => void m.respond(JSON.stringify({ ok: true, result: { notes: ["hello", `aws key ${Secret}`] } })) })
  agentConn = await connectAs(nats.servers, "agent")
  witnessConn = await connectAs(nats.servers, "witness")
  kernelConn = await connectAs(nats.servers, "kernel")
  alice = clientFor(agentConn, "agent:alice")
  carol = clientFor(witnessConn, "user:carol")
})

afterAll(async () => {
  await kernel?.stop()
  await Promise.all([agentConn, witnessConn, toolConn, echoConn, kernelConn].map((c) => c?.close()))
  await nats?.dispose()
})

describe("plugins through the kernel", () => {
  it("the spend-limit plugin allows, holds and denies; each decision names the plugin and its digest", async () => {
    const allow = await alice.propose(call("money_transfer", { from: "pl-a", to: "b", amount: 10 }))
    expect(allow).toMatchObject({ status: 200, outcome: "completed", result: { amount: 10 } })
    const held = (await alice.propose(call("money_transfer", { from: "pl-b", to: "b", amount: 5000 }))) as { status: number; held_id: string; generation: number; call_digest: string; witness_request: { contract_digest: string } }
    expect(held.status).toBe(202)
    const deny = await alice.propose(call("money_transfer", { from: "pl-c", to: "b", amount: 500_000 }))
    expect(deny).toMatchObject({ status: 403, outcome: "denied", reasons: [{ by: "plugin:spend-limit@1.0.0" }] })
    const adjudicated = (await eventsOf(kernelConn, (allow as { held_id: string }).held_id)).find((e) => e.type === "call.adjudicated") as unknown as { decisions: Array<{ by: string; digest?: string; input_digest?: string }> }
    const spend = adjudicated.decisions.find((d) => d.by === "plugin:spend-limit@1.0.0")
    expect(spend?.digest).toBe(pinOf("spend-limit", { stages: ["adjudicate"] }).sha256)
    expect(spend?.input_digest).toMatch(/^[0-9a-f]{64}$/)
    await carol.attest({ held_id: held.held_id, generation: held.generation, call_digest: held.call_digest, contract_digest: held.witness_request.contract_digest, class: "human", decision: "approve" })
    await eventually(async () => (await alice.get(held.held_id)).held?.["lifecycle"] === "completed")
    expect(bank.balance("pl-b")).toBe(5000)
    expect(bank.balance("pl-c")).toBe(10_000)
  })

  it("a transformed call is re-adjudicated from the start, and the reply's executed shows it", async () => {
    const small = await alice.propose(call("pay", { from: "tr-a", to: "b", amount: 20 }))
    expect(small).toMatchObject({ status: 200, outcome: "completed", executed: { tool: "money_transfer" } })
    expect(bank.balance("tr-a")).toBe(9980)
    // The replacement is adjudicated as money_transfer: over the threshold it is held.
    const big = (await alice.propose(call("pay", { from: "tr-b", to: "b", amount: 5000 }))) as unknown as { status: number; witness_request: { presentation: { tool: string; proposed?: { tool: string } } } }
    expect(big.status).toBe(202)
    expect(big.witness_request.presentation).toMatchObject({ tool: "money_transfer", proposed: { tool: "pay" } })
  })

  it("result admission quarantines a planted secret: the bytes never reach the reply", async () => {
    const r = await alice.propose(call("leaky_read", { id: 1 }))
    expect(r).toMatchObject({ status: 200, outcome: "completed", admission: "quarantined", result: null, quarantine: { by: "plugin:secret-scan@1.0.0" } })
    expect(JSON.stringify(r)).not.toContain(Secret)
    const got = await alice.get((r as { held_id: string }).held_id)
    expect(JSON.stringify(got)).not.toContain(Secret)
    const types = (await eventsOf(kernelConn, (r as { held_id: string }).held_id)).map((e) => e.type)
    expect(types).toContain("result.quarantined")
  })

  it("a hostile plugin (infinite loop) fails closed with a decision naming it, and the kernel keeps serving", async () => {
    const root = clientFor(kernelConn, "admin:root")
    const hostile = { ...profile, plugins: [...profile.plugins!, pinOf("fixtures/loop-forever", { stages: ["adjudicate"], timeout_ms: 20 })] }
    // A new organization pin can vote ALLOW: a widening, so a second admin applies it with the first.
    expect((await applyPolicyWitnessed(root, clientFor(witnessConn, "admin:ops"), hostile)).status).toBe(200)
    try {
      const r = await alice.propose(call("money_transfer", { from: "ho-a", to: "b", amount: 10 }))
      expect(r).toMatchObject({ status: 403, outcome: "denied" })
      const adjudicated = (await eventsOf(kernelConn, (r as { held_id: string }).held_id)).find((e) => e.type === "call.adjudicated") as unknown as { decisions: Array<{ by: string; digest?: string; output: { fault?: string } }> }
      const loop = adjudicated.decisions.find((d) => d.by === "plugin:loop-forever@1.0.0")
      expect(loop?.output.fault).toBe("timeout")
      expect(loop?.digest).toMatch(/^[0-9a-f]{64}$/)
      expect(bank.balance("ho-a")).toBe(10_000)
    } finally {
      // Unpinning a plugin widens policy: a second admin witnesses the restore.
      expect((await applyPolicyWitnessed(root, clientFor(witnessConn, "admin:ops"), profile)).status).toBe(200)
    }
    expect(await alice.propose(call("money_transfer", { from: "ho-b", to: "b", amount: 10 }))).toMatchObject({ status: 200 })
  })
})
