import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import type { WitnessClient } from "../../runtime/client/Client.js"
import type { WitnessContract } from "../../runtime/schema/WitnessContract.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventually } from "../support/Stream.js"
import { EchoTool } from "../support/EchoTool.js"

// The seed's money_transfer expression over NATS: (human AND fraud) OR break-glass, with a
// compliance veto. Every combination of the four witness kinds, with and without the veto,
// proposed and attested through the protocol against a real nats-server and kernel.
const rule = { any: [{ all: [{ class: "human" }, { class: "fraud" }] }, { class: "breakglass" }] } as const
const contracts: Record<string, WitnessContract> = { veto: { rule, veto: ["compliance"] }, "no veto": { rule } }
const kinds = [
  { name: "human", witness: "user:carol", class: "human", decision: "approve" },
  { name: "fraud", witness: "svc:fraud", class: "fraud", decision: "approve" },
  { name: "breakglass", witness: "op:breakglass", class: "breakglass", decision: "approve" },
  { name: "compliance rejects", witness: "compliance:zoe", class: "compliance", decision: "reject" }
] as const

const cases = Object.entries(contracts).flatMap(([mode, contract]) =>
  Array.from({ length: 16 }, (_, mask) => {
    const has = (i: number) => (mask & (1 << i)) !== 0
    // The veto is attested first so the outcome does not depend on arrival order.
    const present = [3, 0, 1, 2].filter(has).map((i) => kinds[i]!)
    const vetoed = contract.veto !== undefined && has(3)
    const runs = ((has(0) && has(1)) || has(2)) && !vetoed
    const tool = mode === "veto" ? "transfer_vetoed" : "transfer_plain"
    return { tool, present, vetoed, runs, label: `${mode}: ${present.map((k) => k.name).join(" + ") || "no evidence"}` }
  })
)

let nats: TestNats
let kernel: InProcessKernel
let bank: EchoTool
let conns: Array<NatsConnection> = []
let alice: WitnessClient
let witnesses: Map<string, WitnessClient>

beforeAll(async () => {
  nats = await startTestNats()
  const rules = Object.fromEntries(Object.entries(contracts).map(([mode, contract]) => [mode === "veto" ? "transfer_vetoed" : "transfer_plain", { always_witness: true, contract }]))
  kernel = await startKernel(nats.servers, [testProfile({ rules, grants: { "agent:alice": Object.keys(rules) } })])
  conns = await Promise.all((["echo", "agent", "witness"] as const).map((r) => connectAs(nats.servers, r)))
  bank = new EchoTool(["transfer_vetoed", "transfer_plain"]).serve(conns[0]!)
  alice = clientFor(conns[1]!, "agent:alice")
  witnesses = new Map(kinds.map((k) => [k.witness, clientFor(conns[2]!, k.witness)]))
})

afterAll(async () => {
  await kernel?.stop()
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
})

let n = 0
describe("seed expression over NATS: (human AND fraud) OR breakglass, compliance veto", () => {
  it.each(cases)("$label", async ({ tool, present, vetoed, runs }) => {
    const r = (await alice.propose({ session_id: "s-seed", turn_id: "t1", call_id: `seed${++n}`, tool, args: { from: `acct-seed${n}`, to: "shop", amount: 10 } })) as { status: number; held_id: string }
    expect(r.status).toBe(202)
    const before = bank.effects
    for (const k of present) await witnesses.get(k.witness)!.decide(r.held_id, k.class, k.decision)
    if (runs) {
      await eventually(async () => (await alice.get(r.held_id)).held?.["lifecycle"] === "completed")
      expect(bank.effects - before).toBe(1)
      return
    }
    // The veto is applied by the controller's tick right after the attestation is recorded.
    const held = vetoed ? await eventually(async () => { const h = (await alice.get(r.held_id)).held; return h?.["lifecycle"] === "denied" && h }) : (await alice.get(r.held_id)).held!
    expect(held["lifecycle"]).toBe(vetoed ? "denied" : "open")
    if (!vetoed) expect(held["readiness"]).toBe("unsatisfied")
    expect(bank.effects - before).toBe(0)
  })

  it("covers all 32 combinations", () => expect(cases).toHaveLength(32))
})
