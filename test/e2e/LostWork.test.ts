import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { jetstreamManager } from "@nats-io/jetstream"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { Streams, Subjects } from "../../runtime/schema/Subjects.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { killSoon, profileDir, startKernelProcess, type KernelProcess } from "../support/KernelProcess.js"
import { eventsOf, eventually } from "../support/Stream.js"

// Work recorded by a kernel that dies before it drives the call (or writes its wake) is found
// again: by the witness retrying the same bytes, and by the recovery sweep over open calls. A
// call the policy allows is never held: its kernel dying between the claim and the effect's
// record is recovered from the wake written before the dispatch, and a call answered in the
// background (its result owed on the session, nobody re-sending the proposal) is in the open-call
// index, so the sweep finds it even when its wake is lost.
let nats: TestNats
let agentConn: NatsConnection
let witnessConn: NatsConnection
let toolConn: NatsConnection
let kernelConn: NatsConnection
let alice: WitnessClient
let carol: WitnessClient
let profiles: string
const kernels: Array<KernelProcess> = []
const profile = testProfile({
  grants: { "agent:alice": ["money_transfer"] },
  rules: { money_transfer: { amount_field: "amount", witness_above: 1000, deny_above: 100_000, contract: { rule: { class: "human" } } } }
})

const startKernel = async (env: Record<string, string>) => {
  const k = await startKernelProcess(nats.servers, profiles, { WK_LEASE_MS: "1500", WK_TOOL_TIMEOUT_MS: "1000", ...env })
  kernels.push(k)
  return k
}

let n = 0
const transfer = (amount: number) => ({ session_id: "s-lost", turn_id: "t1", call_id: `l${++n}`, tool: "money_transfer", args: { from: `acct-l${n}`, to: "shop", amount } })
type Held = { held_id: string; call_digest: string; generation: number; witness_request: { contract_digest: string } }
const lifecycleOf = async (id: string) => ((await alice.get(id)).held as Record<string, unknown> | undefined)?.["lifecycle"]
const factsOf = async (id: string) => (await alice.get(id)).held as Record<string, unknown>

/**
 * A bank that SIGKILLs the kernel serving it right after the first transfer it applies, before
 * it answers: the effect happened and no kernel recorded it.
 */
const killingBank = (victim: () => KernelProcess) => {
  let killed = false
  let heldId = ""
  const bank = new DemoBank({
    onApplied: async (_t, key) => {
      if (killed) return
      killed = true
      heldId = key.slice(0, key.lastIndexOf(":"))
      killSoon(victim())
      await new Promise((r) => setTimeout(r, 200))
    }
  }).serve(toolConn)
  /** The held id of the call whose effect the kill followed (its idempotency key is `<held_id>:g<n>`). */
  return { bank, killed: () => killed && victim().child.signalCode === "SIGKILL", heldId: () => heldId }
}

/** Signed approval bytes, kept so the witness can send exactly them again. */
const approvalBytes = (h: Held) => {
  const now = Date.now()
  return new TextEncoder().encode(
    JSON.stringify(
      carol.sign({
        op: "attest",
        held_id: h.held_id,
        generation: h.generation,
        call_digest: h.call_digest,
        contract_digest: h.witness_request.contract_digest,
        class: "human",
        decision: "approve",
        issued_at: new Date(now).toISOString(),
        expires_at: new Date(now + 10 * 60_000).toISOString(),
        nonce: `retry-${h.held_id}`
      })
    )
  )
}

/**
 * The approval is recorded by a kernel whose executor never runs, which is then SIGKILLed, and
 * its wake is lost (the wake stream is purged): nothing but the durable record remembers the call.
 */
const strandApprovedCall = async (amount: number) => {
  const victim = await startKernel({ WK_EXECUTOR_PAUSED: "1", WK_SWEEP_MS: "0" })
  const h = (await alice.propose(transfer(amount))) as Held & { status: number }
  expect(h.status).toBe(202)
  const bytes = approvalBytes(h)
  expect((await carol.request<{ disposition: string }>(Subjects.attest, bytes)).disposition).toBe("accepted")
  await victim.kill()
  const jsm = await jetstreamManager(kernelConn)
  await jsm.streams.purge(Streams.wakes)
  return { h, bytes }
}

beforeAll(async () => {
  nats = await startTestNats()
  profiles = profileDir([profile])
  agentConn = await connectAs(nats.servers, "agent")
  witnessConn = await connectAs(nats.servers, "witness")
  toolConn = await connectAs(nats.servers, "bank")
  kernelConn = await connectAs(nats.servers, "kernel")
  alice = clientFor(agentConn, "agent:alice")
  carol = clientFor(witnessConn, "user:carol")
})

afterAll(async () => {
  await Promise.all(kernels.map((k) => k.kill()))
  await Promise.all([agentConn, witnessConn, toolConn, kernelConn].map((c) => c?.close()))
  await nats?.dispose()
})

describe("lost work is found again", () => {
  it("the kernel dies right after recording an approval; the witness retries the same bytes: duplicate, and the call completes once", async () => {
    const bank = new DemoBank().serve(toolConn)
    const { h, bytes } = await strandApprovedCall(4000)
    const k = await startKernel({ WK_SWEEP_MS: "0" })
    try {
      const again = await carol.request<{ status: number; disposition: string }>(Subjects.attest, bytes)
      expect(again).toMatchObject({ status: 200, disposition: "duplicate" })
      await eventually(async () => (await lifecycleOf(h.held_id)) === "completed", 40_000)
      expect(bank.effects).toBe(1)
      const types = (await eventsOf(kernelConn, h.held_id)).map((e) => e.type)
      expect(types.filter((t) => t === "attestation.accepted")).toHaveLength(1)
      expect(types.filter((t) => t === "effect.dispatched")).toHaveLength(1)
    } finally {
      bank.stop()
      await k.kill()
    }
  }, 120_000)

  it("a call whose wake was lost is completed by the recovery sweep of a restarted kernel", async () => {
    const bank = new DemoBank().serve(toolConn)
    const { h } = await strandApprovedCall(4100)
    const k = await startKernel({ WK_SWEEP_MS: "1000" })
    try {
      await eventually(async () => (await lifecycleOf(h.held_id)) === "completed", 40_000)
      expect(bank.effects).toBe(1)
      expect((await eventsOf(kernelConn, h.held_id)).filter((e) => e.type === "effect.dispatched")).toHaveLength(1)
    } finally {
      bank.stop()
      await k.kill()
    }
  }, 120_000)

  it("an ALLOW call, never held, whose kernel died after the effect and before recording it: a restarted kernel completes it from its wake (no sweep, no proposal sent again); one effect", async () => {
    let victim = await startKernel({ WK_SWEEP_MS: "0" })
    const { bank, killed, heldId: killedId } = killingBank(() => victim)
    let k: KernelProcess | undefined
    try {
      void alice.propose(transfer(500)).catch(() => undefined) // its kernel dies before it answers
      await eventually(async () => killed(), 30_000)
      const heldId = killedId()
      victim = await startKernel({ WK_SWEEP_MS: "0" })
      k = victim
      await eventually(async () => (await lifecycleOf(heldId)) === "completed", 40_000)
      expect(await factsOf(heldId)).toMatchObject({ execution: "effect-recorded", result: { amount: 500 } })
      expect(bank.effects).toBe(1)
      const types = (await eventsOf(kernelConn, heldId)).map((e) => e.type)
      expect(types).not.toContain("call.held")
      expect(types.filter((t) => t === "effect.dispatched")).toHaveLength(1)
    } finally {
      bank.stop()
      await k?.kill()
    }
  }, 120_000)

  it("an ALLOW call answered in the background, never held, whose kernel died after the effect and whose wake was lost: the recovery sweep completes and delivers it; one effect", async () => {
    let victim = await startKernel({ WK_SWEEP_MS: "0" })
    const { bank, killed } = killingBank(() => victim)
    let k: KernelProcess | undefined
    try {
      const c = { ...transfer(600), preferences: { wait: { mode: "background" } } }
      const r = (await alice.propose(c)) as { status: number; outcome: string; held_id: string }
      expect(r).toMatchObject({ status: 202, outcome: "accepted" })
      await eventually(async () => killed(), 30_000)
      await (await jetstreamManager(kernelConn)).streams.purge(Streams.wakes)
      victim = await startKernel({ WK_SWEEP_MS: "1000" })
      k = victim
      await eventually(async () => (await lifecycleOf(r.held_id)) === "completed", 40_000)
      expect(bank.effects).toBe(1)
      expect((await eventsOf(kernelConn, r.held_id)).filter((e) => e.type === "effect.dispatched")).toHaveLength(1)
      const delivered = await alice.result(r.held_id, { sessionId: c.session_id, timeoutMs: 20_000 })
      expect(delivered).toMatchObject({ held_id: r.held_id, outcome: "completed", result: { amount: 600 } })
    } finally {
      bank.stop()
      await k?.kill()
    }
  }, 120_000)
})
