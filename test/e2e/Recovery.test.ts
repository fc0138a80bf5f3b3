import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { killSoon, profileDir, startKernelProcess, type KernelProcess } from "../support/KernelProcess.js"
import { EchoTool } from "../support/EchoTool.js"
import { eventsOf, eventually } from "../support/Stream.js"

// Crash recovery and multi-process execution, with kernels as real OS processes killed by SIGKILL.
let nats: TestNats
let agentConn: NatsConnection
let witnessConn: NatsConnection
let toolConn: NatsConnection
let echoConn: NatsConnection
let kernelConn: NatsConnection
let alice: WitnessClient
let carol: WitnessClient
let profiles: string
const kernels: Array<KernelProcess> = []
const env = { WK_LEASE_MS: "1500", WK_TOOL_TIMEOUT_MS: "1000" }
const profile = testProfile({
  grants: { "agent:alice": ["money_transfer", "no_readback_op"] },
  rules: {
    money_transfer: { amount_field: "amount", witness_above: 1000, deny_above: 100_000, contract: { rule: { class: "human" } } },
    no_readback_op: { always_witness: true, readback: false, contract: { rule: { class: "human" } } }
  }
})

const startKernel = async () => {
  const k = await startKernelProcess(nats.servers, profiles, env)
  kernels.push(k)
  return k
}

let n = 0
const transfer = (amount: number) => ({ session_id: "s-recovery", turn_id: "t1", call_id: `r${++n}`, tool: "money_transfer", args: { from: `acct-r${n}`, to: "shop", amount } })
type Held = { held_id: string; call_digest: string; generation: number; witness_request: { contract_digest: string } }
const approve = (h: Held) => carol.attest({ held_id: h.held_id, generation: h.generation, call_digest: h.call_digest, contract_digest: h.witness_request.contract_digest, class: "human", decision: "approve" })
const factsOf = async (id: string) => (await alice.get(id)).held as Record<string, unknown>

beforeAll(async () => {
  nats = await startTestNats()
  profiles = profileDir([profile])
  agentConn = await connectAs(nats.servers, "agent")
  witnessConn = await connectAs(nats.servers, "witness")
  toolConn = await connectAs(nats.servers, "bank")
  echoConn = await connectAs(nats.servers, "echo")
  kernelConn = await connectAs(nats.servers, "kernel")
  alice = clientFor(agentConn, "agent:alice")
  carol = clientFor(witnessConn, "user:carol")
})

afterAll(async () => {
  await Promise.all(kernels.map((k) => k.kill()))
  await Promise.all([agentConn, witnessConn, toolConn, echoConn, kernelConn].map((c) => c?.close()))
  await nats?.dispose()
})

describe("execution and recovery", () => {
  it("crash after effect, before record: a restarted kernel resolves it by read-back; one effect", async () => {
    let victim = await startKernel()
    let killed = false
    const bank = new DemoBank({
      onApplied: async () => {
        if (killed) return
        killed = true
        killSoon(victim)
        await new Promise((r) => setTimeout(r, 200))
      }
    }).serve(toolConn)
    try {
      const h = (await alice.propose(transfer(4000))) as Held & { status: number }
      expect(h.status).toBe(202)
      expect((await approve(h)).disposition).toBe("accepted")
      await eventually(async () => killed && victim.child.signalCode === "SIGKILL")
      expect(bank.effects).toBe(1)
      expect(await factsOf(h.held_id).catch(() => undefined)).toBeUndefined() // no kernel answers now
      victim = await startKernel()
      const f = await eventually(async () => {
        const x = await factsOf(h.held_id)
        return x["lifecycle"] === "completed" ? x : undefined
      }, 40_000)
      expect(f).toMatchObject({ execution: "effect-recorded", result_admission: "admitted", result: { amount: 4000 } })
      const types = (await eventsOf(kernelConn, h.held_id)).map((e) => e.type)
      expect(types).toContain("effect.outcome_unknown")
      expect(types.filter((t) => t === "effect.readback")).toHaveLength(1)
      expect(types.filter((t) => t === "effect.dispatched")).toHaveLength(1)
      const recorded = (await eventsOf(kernelConn, h.held_id)).find((e) => e.type === "effect.recorded") as { via: string }
      expect(recorded.via).toBe("readback")
      expect(bank.effects).toBe(1)
      expect(bank.invocations.get(`${h.held_id}:g1`)).toBe(1)
    } finally {
      bank.stop()
      await victim.kill()
    }
  })

  it("crash after dispatch, before the tool applied it: read-back says absent, dispatch again under the same key; one effect", async () => {
    let victim = await startKernel()
    let dropped = false
    const bank = new DemoBank({
      onRequest: () => {
        if (dropped) return
        dropped = true
        killSoon(victim)
        return "drop"
      }
    }).serve(toolConn)
    try {
      const h = (await alice.propose(transfer(4100))) as Held
      await approve(h)
      await eventually(async () => dropped && victim.child.signalCode === "SIGKILL")
      expect(bank.effects).toBe(0)
      victim = await startKernel()
      await eventually(async () => (await factsOf(h.held_id))["lifecycle"] === "completed", 40_000)
      const events = await eventsOf(kernelConn, h.held_id)
      const dispatched = events.filter((e) => e.type === "effect.dispatched") as Array<{ idempotency_key: string; attempt: number }>
      expect(dispatched.map((d) => d.attempt)).toEqual([1, 2])
      expect(new Set(dispatched.map((d) => d.idempotency_key)).size).toBe(1)
      expect(events.filter((e) => e.type === "effect.readback").map((e) => (e as { applied: boolean }).applied)).toEqual([false])
      expect(bank.effects).toBe(1)
      expect(bank.invocations.get(`${h.held_id}:g1`)).toBe(2)
    } finally {
      bank.stop()
      await victim.kill()
    }
  })

  it("a tool with no read-back stays outcome-unknown and asks for a witness; it is never retried blindly", async () => {
    let victim = await startKernel()
    const tool = new EchoTool(["no_readback_op"], false)
    let first = true
    const sub = echoConn.subscribe("wk.v1.tools.no_readback_op.invoke", {
      callback: () => {
        tool.invocations.set("any", (tool.invocations.get("any") ?? 0) + 1)
        if (first) {
          first = false
          killSoon(victim)
        }
      }
    })
    try {
      const h = (await alice.propose({ session_id: "s-recovery", turn_id: "t1", call_id: `r${++n}`, tool: "no_readback_op", args: {} })) as Held
      await approve(h)
      await eventually(async () => victim.child.signalCode === "SIGKILL")
      victim = await startKernel()
      const f = await eventually(async () => {
        const x = await factsOf(h.held_id)
        return x["needs_witness"] === true ? x : undefined
      }, 40_000)
      expect(f).toMatchObject({ execution: "outcome-unknown", lifecycle: "open" })
      await new Promise((r) => setTimeout(r, 2000))
      expect(tool.invocations.get("any")).toBe(1)
      expect((await eventsOf(kernelConn, h.held_id)).filter((e) => e.type === "effect.dispatched")).toHaveLength(1)
    } finally {
      sub.unsubscribe()
      await victim.kill()
    }
  })

  it("two kernel processes on one NATS, 1,000 held calls approved concurrently: exactly 1,000 effects, no key twice", async () => {
    const a = await startKernel()
    const b = await startKernel()
    const bank = new DemoBank({ openingBalance: 1_000_000 }).serve(toolConn)
    try {
      const calls = Array.from({ length: 1000 }, () => transfer(2000))
      const held: Array<Held> = []
      for (let i = 0; i < calls.length; i += 100) {
        const replies = await Promise.all(calls.slice(i, i + 100).map((c) => alice.propose(c)))
        for (const r of replies) {
          expect(r.status).toBe(202)
          held.push(r as Held)
        }
      }
      const t0 = Date.now()
      for (let i = 0; i < held.length; i += 200) {
        const replies = await Promise.all(held.slice(i, i + 200).map(approve))
        expect(replies.every((r) => r.disposition === "accepted")).toBe(true)
      }
      await eventually(async () => bank.effects >= 1000, 90_000, 200)
      console.log(`1,000 approvals -> 1,000 effects across 2 kernel processes in ${Date.now() - t0} ms`)
      await new Promise((r) => setTimeout(r, 1000))
      expect(bank.effects).toBe(1000)
      expect(bank.invocations.size).toBe(1000)
      expect([...bank.invocations.values()].every((c) => c === 1)).toBe(true)
      const owners = new Set<string>()
      for (const h of held.slice(0, 50)) {
        const ev = (await eventsOf(kernelConn, h.held_id)).find((e) => e.type === "effect.dispatched") as { owner: string }
        owners.add(ev.owner)
      }
      console.log(`dispatching owners in a sample of 50: ${[...owners].join(", ")}`)
    } finally {
      bank.stop()
      await Promise.all([a.kill(), b.kill()])
    }
  })
})
