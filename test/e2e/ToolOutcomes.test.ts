import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection, Subscription } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import type { JsonObject } from "../../runtime/schema/Json.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { profileDir, startKernelProcess, type KernelProcess } from "../support/KernelProcess.js"
import { eventsOf, eventually } from "../support/Stream.js"
import { wkIn } from "../support/WkProcess.js"
import { ExitCode } from "../../runtime/cli/Exit.js"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

// Every execution state ends: a tool that nobody serves is retried until it is back; an unknown
// outcome is settled by read-back, by re-sending to an idempotent tool, by a read-back witness
// or by an admin; and each end reaches the agent.
let nats: TestNats
let agentConn: NatsConnection
let witnessConn: NatsConnection
let toolConn: NatsConnection
let echoConn: NatsConnection
let kernelConn: NatsConnection
let alice: WitnessClient
let carol: WitnessClient
let kernel: KernelProcess
const profile = testProfile({
  grants: { "agent:alice": ["money_transfer", "no_readback_op", "idempotent_op"] },
  rules: {
    money_transfer: { amount_field: "amount", witness_above: 1000, deny_above: 100_000, contract: { rule: { class: "human" } } },
    no_readback_op: { always_witness: true, readback: false, contract: { rule: { class: "human" } } },
    idempotent_op: { idempotent: true }
  }
})

const wk = wkIn(() => nats.servers, mkdtempSync(join(tmpdir(), "wk-cwd-")), mkdtempSync(join(tmpdir(), "wk-config-")))

let n = 0
const call = (tool: string, args: JsonObject) => ({ session_id: "s-outcomes", turn_id: "t1", call_id: `o${++n}`, tool, args })
type Held = { status: number; held_id: string; call_digest: string; generation: number; witness_request: { contract_digest: string } }
const factsOf = async (id: string) => (await alice.get(id)).held as Record<string, unknown>
const typesOf = async (id: string) => (await eventsOf(kernelConn, id)).map((e) => e.type)
const ended = (id: string) =>
  eventually(async () => {
    const f = await factsOf(id)
    return f["lifecycle"] !== "open" ? f : undefined
  }, 60_000)
const approve = (h: Held) => carol.attest({ held_id: h.held_id, generation: h.generation, call_digest: h.call_digest, contract_digest: h.witness_request.contract_digest, class: "human", decision: "approve" })

/** A tool service that receives requests and never answers them: every outcome is unknown. */
const silentTool = (tool: string): { readonly received: () => number; readonly stop: () => void } => {
  let received = 0
  const sub: Subscription = echoConn.subscribe(Subjects.toolInvoke(tool), { callback: () => void received++ })
  return { received: () => received, stop: () => sub.unsubscribe() }
}

beforeAll(async () => {
  nats = await startTestNats()
  agentConn = await connectAs(nats.servers, "agent")
  witnessConn = await connectAs(nats.servers, "witness")
  toolConn = await connectAs(nats.servers, "bank")
  echoConn = await connectAs(nats.servers, "echo")
  kernelConn = await connectAs(nats.servers, "kernel")
  alice = clientFor(agentConn, "agent:alice")
  carol = clientFor(witnessConn, "user:carol")
  kernel = await startKernelProcess(nats.servers, profileDir([profile]), { WK_LEASE_MS: "1500", WK_TOOL_TIMEOUT_MS: "1000" })
}, 60_000)

afterAll(async () => {
  await kernel?.kill()
  await Promise.all([agentConn, witnessConn, toolConn, echoConn, kernelConn].map((c) => c?.close()))
  await nats?.dispose()
})

describe("a tool outage", () => {
  it("no tool service answers: the call waits, retrying; when the service is back the call completes exactly once", async () => {
    const h = (await alice.propose(call("money_transfer", { from: "acct-o1", to: "shop", amount: 4000 }))) as Held
    expect(h.status).toBe(202)
    expect((await approve(h)).disposition).toBe("accepted")
    await eventually(async () => (await typesOf(h.held_id)).filter((t) => t === "effect.unreached").length >= 2, 30_000)
    expect(await factsOf(h.held_id)).toMatchObject({ lifecycle: "open", execution: "none" })
    const bank = new DemoBank().serve(toolConn)
    try {
      const f = await ended(h.held_id)
      expect(f).toMatchObject({ lifecycle: "completed", execution: "effect-recorded", result: { amount: 4000 } })
      expect(bank.effects).toBe(1)
      expect(bank.invocations.get(`${h.held_id}:g1`)).toBe(1)
      const types = await typesOf(h.held_id)
      expect(types).not.toContain("effect.outcome_unknown")
      await eventually(async () => (await factsOf(h.held_id))["continuation_delivery"] !== "pending")
    } finally {
      bank.stop()
    }
  }, 120_000)
})

describe("an unknown outcome", () => {
  it("with read-back: settles by itself (absent, so dispatched again under the same key); one effect", async () => {
    let dropped = false
    const bank = new DemoBank({ onRequest: () => (dropped ? undefined : ((dropped = true), "drop")) }).serve(toolConn)
    try {
      const h = (await alice.propose(call("money_transfer", { from: "acct-o2", to: "shop", amount: 4100 }))) as Held
      await approve(h)
      const f = await ended(h.held_id)
      expect(f).toMatchObject({ lifecycle: "completed", result: { amount: 4100 } })
      const types = await typesOf(h.held_id)
      expect(types).toContain("effect.outcome_unknown")
      expect(types).toContain("effect.readback")
      expect(bank.effects).toBe(1)
    } finally {
      bank.stop()
    }
  }, 120_000)

  it("with read-back, the reply lost and the tool down when read-back is asked: read-back is asked again until the tool is back; one effect, delivered", async () => {
    // The bank applies the transfer, then goes down before it replies: the kernel's read-back
    // meets nobody. That is an outage, not a tool without read-back.
    let release = () => {}
    const held = new Promise<void>((r) => (release = r))
    let applied = 0
    const bank: DemoBank = new DemoBank({
      onApplied: async () => {
        if (applied++ > 0) return
        bank.stop()
        await held
      }
    }).serve(toolConn)
    try {
      const h = (await alice.propose(call("money_transfer", { from: "acct-o6", to: "shop", amount: 600 }))) as Held
      expect(h.held_id).toBeTruthy()
      const waited = await eventually(async () => {
        const f = await factsOf(h.held_id)
        const types = await typesOf(h.held_id)
        return f["needs_witness"] === true || types.includes("effect.readback_unreached") ? { f, types } : undefined
      }, 30_000)
      expect(waited.f).toMatchObject({ lifecycle: "open", execution: "outcome-unknown", needs_witness: false })
      expect(bank.effects).toBe(1)
      bank.serve(toolConn)
      const f = await ended(h.held_id)
      expect(f).toMatchObject({ lifecycle: "completed", execution: "effect-recorded", needs_witness: false, result: { amount: 600 } })
      expect(bank.effects).toBe(1)
      expect(bank.invocations.get(`${h.held_id}:g1`)).toBe(1)
      const types = await typesOf(h.held_id)
      expect(types.filter((t) => t === "effect.dispatched")).toHaveLength(1)
      expect(types.filter((t) => t === "effect.recorded")).toHaveLength(1)
      await eventually(async () => (await factsOf(h.held_id))["continuation_delivery"] !== "pending")
    } finally {
      release()
      bank.stop()
    }
  }, 120_000)

  it("without read-back, a read-back witness the contract names attests the effect happened: the call completes with what it read back and is delivered", async () => {
    const tool = silentTool("no_readback_op")
    try {
      const h = (await alice.propose(call("no_readback_op", { n: 1 }))) as Held
      await approve(h)
      await eventually(async () => (await factsOf(h.held_id))["needs_witness"] === true, 30_000)
      // The proposer cannot settle its own call: its NATS user may not send it, and signed by it
      // over another connection the kernel refuses it.
      await expect(alice.settle(h.held_id, "effect_happened")).rejects.toThrow(/Permissions Violation/)
      expect((await clientFor(witnessConn, "agent:alice").settle(h.held_id, "effect_happened")).status).toBe(422)
      const r = await carol.settle(h.held_id, "effect_happened", { result: { checked: "ledger row 42" }, reason: "the row is there" })
      expect(r).toMatchObject({ status: 202, disposition: "accepted", authority: "witness" })
      const f = await ended(h.held_id)
      expect(f).toMatchObject({ lifecycle: "completed", execution: "effect-recorded", result: { checked: "ledger row 42" } })
      await eventually(async () => (await factsOf(h.held_id))["continuation_delivery"] !== "pending")
      expect(tool.received()).toBe(1)
    } finally {
      tool.stop()
    }
  }, 120_000)

  it("without read-back, an admin's signed determination that no effect happened ends the call, and it is delivered", async () => {
    const tool = silentTool("no_readback_op")
    try {
      const h = (await alice.propose(call("no_readback_op", { n: 2 }))) as Held
      await approve(h)
      await eventually(async () => (await factsOf(h.held_id))["needs_witness"] === true, 30_000)
      // The admin settles it with `wk settle`, as a person would.
      const bad = await wk("settle", h.held_id, "--principal", "admin:root")
      expect(bad.code, bad.stderr).toBe(ExitCode.usage)
      const r = await wk("settle", h.held_id, "--principal", "admin:root", "--no-effect", "--reason", "the service logs show no request", "--json")
      expect(r.code, r.stderr).toBe(0)
      expect(JSON.parse(r.stdout)).toMatchObject({ status: 202, authority: "admin" })
      const f = await ended(h.held_id)
      expect(f).toMatchObject({ lifecycle: "completed", execution: "effect-recorded" })
      expect(JSON.stringify(f["result"])).toMatch(/did not happen \(admin admin:root: the service logs show no request\)/)
      await eventually(async () => (await factsOf(h.held_id))["continuation_delivery"] !== "pending")
      // A second settlement finds nothing unknown.
      expect((await carol.settle(h.held_id, "effect_happened")).status).toBe(409)
      expect((await typesOf(h.held_id)).filter((t) => t === "effect.settled")).toHaveLength(1)
    } finally {
      tool.stop()
    }
  }, 120_000)

  it("a tool its rule declares idempotent, without read-back, is sent the same key again", async () => {
    let received = 0
    const enc = new TextEncoder()
    const sub = echoConn.subscribe(Subjects.toolInvoke("idempotent_op"), {
      callback: (_e, m) => {
        received++
        if (received > 1) m.respond(enc.encode(JSON.stringify({ ok: true, result: { done: true } })))
      }
    })
    try {
      const h = (await alice.propose(call("idempotent_op", {}))) as Held
      const f = await ended(h.held_id)
      expect(f).toMatchObject({ lifecycle: "completed", result: { done: true } })
      const events = await eventsOf(kernelConn, h.held_id)
      expect(events.map((e) => e.type)).toContain("effect.resend")
      const keys = events.filter((e) => e.type === "effect.dispatched").map((e) => (e as { idempotency_key: string }).idempotency_key)
      expect(keys).toHaveLength(2)
      expect(new Set(keys).size).toBe(1)
    } finally {
      sub.unsubscribe()
    }
  }, 120_000)
})
