import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { applyPolicyWitnessed } from "../support/PolicyChange.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { EchoTool } from "../support/EchoTool.js"
import { eventsOf, eventually } from "../support/Stream.js"
import type { Profile } from "../../runtime/schema/Profile.js"

// The seed's proof, through the protocol, against a real nats-server and an in-process kernel.
let nats: TestNats
let kernel: InProcessKernel
let bank: DemoBank
let echo: EchoTool
let agentConn: NatsConnection
let witnessConn: NatsConnection
let toolConn: NatsConnection
let echoConn: NatsConnection
let kernelConn: NatsConnection
let alice: WitnessClient
let carol: WitnessClient
let dave: WitnessClient
let erin: WitnessClient
let zoe: WitnessClient
let olga: WitnessClient
let root: WitnessClient
let paused = false

const rules: Profile["rules"] = {
  money_transfer: { amount_field: "amount", witness_above: 1000, deny_above: 100_000, contract: { rule: { class: "human" }, veto: ["compliance"] } },
  quorum_op: { always_witness: true, contract: { rule: { quorum: { n: 2, of: [{ principal: "user:carol" }, { principal: "user:dave" }, { principal: "user:erin" }] } } } },
  fallback_deny_op: { always_witness: true, contract: { rule: { class: "human" }, fallback: { after_ms: 700, action: "deny" } } },
  fallback_route_op: { always_witness: true, contract: { rule: { class: "fraud" }, fallback: { after_ms: 700, action: "route", rule: { class: "oncall" } } } }
}
const grants = { "agent:alice": ["money_transfer", "quorum_op", "fallback_deny_op", "fallback_route_op"] }
const profile = testProfile({ rules, grants })

let n = 0
const transfer = (amount: number, extra: Record<string, unknown> = {}) => ({
  session_id: "s-witness",
  turn_id: "t1",
  call_id: `w${++n}`,
  tool: "money_transfer",
  args: { from: `acct-${n}`, to: "shop", amount },
  ...extra
})
const op = (tool: string) => ({ session_id: "s-witness", turn_id: "t1", call_id: `w${++n}`, tool, args: { n } })

type Held = { status: 202; held_id: string; call_digest: string; generation: number; witness_request: { contract_digest: string } }
const held = async (c: ReturnType<typeof transfer> | ReturnType<typeof op>): Promise<Held> => {
  const r = await alice.propose(c as never)
  expect(r.status).toBe(202)
  return r as Held
}
const facts = async (id: string) => (await alice.get(id)).held as Record<string, unknown>
const bindingOf = (h: Held) => ({ held_id: h.held_id, generation: h.generation, call_digest: h.call_digest, contract_digest: h.witness_request.contract_digest })

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [profile], { config: { executorPaused: () => paused } })
  toolConn = await connectAs(nats.servers, "bank")
  echoConn = await connectAs(nats.servers, "echo")
  bank = new DemoBank().serve(toolConn)
  echo = new EchoTool(["quorum_op", "fallback_deny_op", "fallback_route_op"]).serve(echoConn)
  agentConn = await connectAs(nats.servers, "agent")
  witnessConn = await connectAs(nats.servers, "witness")
  kernelConn = await connectAs(nats.servers, "kernel")
  alice = clientFor(agentConn, "agent:alice")
  carol = clientFor(witnessConn, "user:carol")
  dave = clientFor(witnessConn, "user:dave")
  erin = clientFor(witnessConn, "user:erin")
  zoe = clientFor(witnessConn, "compliance:zoe")
  olga = clientFor(witnessConn, "oncall:olga")
  root = clientFor(kernelConn, "admin:root")
})

afterAll(async () => {
  await kernel?.stop()
  await Promise.all([agentConn, witnessConn, toolConn, echoConn, kernelConn].map((c) => c?.close()))
  await nats?.dispose()
})

describe("REQUIRE_WITNESS end to end", () => {
  it("a transfer over the threshold returns 202; a second principal's bound approval releases it; it executes once", async () => {
    const requests: Array<{ held_id: string }> = []
    const sub = witnessConn.subscribe("wk.v1.witness.requests.>", { callback: (_e, m) => void requests.push(m.json()) })
    await witnessConn.flush()
    const h = await held(transfer(5000))
    await eventually(async () => requests.some((r) => r.held_id === h.held_id))
    sub.unsubscribe()
    const effects = bank.effects
    expect(await carol.attest({ ...bindingOf(h), class: "human", decision: "approve" })).toEqual({ status: 202, disposition: "accepted" })
    const f = await eventually(async () => {
      const x = await facts(h.held_id)
      return x["lifecycle"] === "completed" ? x : undefined
    })
    expect(f).toMatchObject({ execution: "effect-recorded", result_admission: "admitted", readiness: "satisfied", result: { amount: 5000 } })
    expect(bank.effects - effects).toBe(1)
    const types = (await eventsOf(kernelConn, h.held_id)).map((e) => e.type)
    expect(types.slice(0, 9)).toEqual([
      "call.proposed", "call.adjudicated", "call.held", "attestation.accepted", "readiness.changed",
      "execution.leased", "effect.dispatched", "effect.recorded", "result.admitted"
    ])
    const delivered = await alice.result(h.held_id)
    expect(delivered).toMatchObject({ held_id: h.held_id, outcome: "completed", admission: "admitted", result: { amount: 5000 } })
  })

  it("the same approval 20 times, concurrently and out of order with other witnesses' approvals, gives one effect", async () => {
    const h = await held(transfer(6000))
    const effects = bank.effects
    const same = { ...bindingOf(h), class: "human" as const, decision: "approve" as const, nonce: "nonce-carol-1", issued_at: new Date().toISOString(), expires_at: new Date(Date.now() + 600_000).toISOString() }
    const replies = await Promise.all([
      ...Array.from({ length: 20 }, () => carol.attest(same)),
      dave.attest({ ...bindingOf(h), class: "human", decision: "approve" }),
      erin.attest({ ...bindingOf(h), class: "human", decision: "approve" })
    ])
    const carolReplies = replies.slice(0, 20).map((r) => r.disposition)
    expect(carolReplies.filter((d) => d === "accepted").length).toBe(1)
    expect(carolReplies.filter((d) => d === "duplicate").length).toBe(19)
    await eventually(async () => (await facts(h.held_id))["lifecycle"] === "completed")
    await new Promise((r) => setTimeout(r, 300))
    expect(bank.effects - effects).toBe(1)
    const events = await eventsOf(kernelConn, h.held_id)
    expect(events.filter((e) => e.type === "effect.dispatched")).toHaveLength(1)
    expect(events.filter((e) => e.type === "attestation.accepted" && e.witness === "user:carol")).toHaveLength(1)
  })

  it("approvals bound to an old generation, another call's digest, an expired time, or signed by the proposer are refused, recorded, and run nothing", async () => {
    const c = transfer(7000)
    const g1 = await held(c)
    const g2 = (await alice.propose({ ...c, args: { ...c.args, amount: 7100 } } as never)) as Held
    expect(g2).toMatchObject({ status: 202, generation: 2, held_id: g1.held_id })
    const other = await held(transfer(7200))
    const effects = bank.effects

    const oldGen = await carol.attest({ ...bindingOf(g1), contract_digest: g2.witness_request.contract_digest, class: "human", decision: "approve" })
    expect(oldGen).toMatchObject({ status: 409, disposition: "stale" })
    expect(oldGen.reason).toContain("generation")
    const otherDigest = await carol.attest({ ...bindingOf(g2), call_digest: other.call_digest, class: "human", decision: "approve" })
    expect(otherDigest).toMatchObject({ status: 409, disposition: "stale", reason: "bound to another call digest" })
    const expired = await carol.attest({ ...bindingOf(g2), class: "human", decision: "approve", issued_at: new Date(Date.now() - 120_000).toISOString(), expires_at: new Date(Date.now() - 60_000).toISOString() })
    expect(expired).toMatchObject({ status: 422, disposition: "invalid" })
    expect(expired.reason).toContain("expired")
    const selfAsAgentPrincipal = await clientFor(witnessConn, "agent:alice").attest({ ...bindingOf(g2), class: "agent", decision: "approve" })
    expect(selfAsAgentPrincipal).toMatchObject({ status: 422, disposition: "invalid" })
    expect(selfAsAgentPrincipal.reason).toContain("not independent")
    const peerAgent = await clientFor(witnessConn, "agent:bob").attest({ ...bindingOf(g2), class: "agent", decision: "approve" })
    expect(peerAgent).toMatchObject({ status: 422, disposition: "invalid" })
    expect(peerAgent.reason).toContain("wrong class")
    const wrongContract = await carol.attest({ ...bindingOf(g2), contract_digest: "0".repeat(64), class: "human", decision: "approve" })
    expect(wrongContract).toMatchObject({ status: 422, disposition: "invalid", reason: "contract mismatch: bound to another witness contract" })
    const first = await dave.attest({ ...bindingOf(other), class: "human", decision: "reject", nonce: "replayed-nonce-1" })
    expect(first.disposition).toBe("accepted")
    const replay = await dave.attest({ ...bindingOf(other), class: "human", decision: "approve", nonce: "replayed-nonce-1" })
    expect(replay).toMatchObject({ status: 422, disposition: "invalid" })
    expect(replay.reason).toContain("nonce")

    await new Promise((r) => setTimeout(r, 300))
    expect(bank.effects).toBe(effects)
    const rejected = (await eventsOf(kernelConn, g1.held_id)).filter((e) => e.type === "attestation.rejected")
    expect(rejected.map((e) => (e as { disposition: string }).disposition).sort()).toEqual(["invalid", "invalid", "invalid", "invalid", "stale", "stale"])
    expect(await facts(g1.held_id)).toMatchObject({ lifecycle: "open", readiness: "unsatisfied", execution: "none" })
  })

  it("a policy-epoch change sends a ready call back to evidence reconciliation", async () => {
    paused = true
    try {
      const h = await held(transfer(8000))
      expect((await carol.attest({ ...bindingOf(h), class: "human", decision: "approve" })).disposition).toBe("accepted")
      await eventually(async () => (await facts(h.held_id))["readiness"] === "satisfied")
      // The new policy no longer counts carol as a human witness.
      // (Withdrawing a class only narrows, so it applies at once, with the executor still paused.)
      const principals = { ...profile.principals!, "user:carol": { ...profile.principals!["user:carol"]!, classes: [] } }
      const applied = await root.applyPolicy({ ...profile, principals } as never)
      expect(applied.status).toBe(200)
      const f = await eventually(async () => {
        const x = await facts(h.held_id)
        return x["policy_epoch_checked"] === applied.policy_epoch && x["readiness"] === "unsatisfied" ? x : undefined
      })
      expect(f).toMatchObject({ lifecycle: "open", execution: "none" })
      const readiness = (await eventsOf(kernelConn, h.held_id)).filter((e) => e.type === "readiness.changed").map((e) => (e as { readiness: string }).readiness)
      expect(readiness).toEqual(["satisfied", "stale", "unsatisfied"])
      const effects = bank.effects
      paused = false
      await new Promise((r) => setTimeout(r, 500))
      expect(bank.effects).toBe(effects)
      expect((await dave.attest({ ...bindingOf(h), class: "human", decision: "approve" })).disposition).toBe("accepted")
      await eventually(async () => (await facts(h.held_id))["lifecycle"] === "completed")
      expect(bank.effects - effects).toBe(1)
    } finally {
      paused = false
      // Giving carol her class back widens the registry: a second admin witnesses it.
      await applyPolicyWitnessed(root, clientFor(witnessConn, "admin:ops"), profile)
    }
  })

  it("a revoke withdraws the witness's evidence before dispatch", async () => {
    paused = true
    try {
      const h = await held(transfer(8500))
      const t0 = Date.now()
      await carol.attest({ ...bindingOf(h), class: "human", decision: "approve", issued_at: new Date(t0 - 1000).toISOString() })
      await eventually(async () => (await facts(h.held_id))["readiness"] === "satisfied")
      expect((await carol.attest({ ...bindingOf(h), class: "human", decision: "revoke", issued_at: new Date(t0).toISOString() })).disposition).toBe("accepted")
      await eventually(async () => (await facts(h.held_id))["readiness"] === "unsatisfied")
      const effects = bank.effects
      paused = false
      await new Promise((r) => setTimeout(r, 400))
      expect(bank.effects).toBe(effects)
      expect(((await facts(h.held_id))["evidence"] as Array<{ status: string }>).map((e) => e.status)).toEqual(["revoked", "valid"])
    } finally {
      paused = false
    }
  })

  it("veto: one reject from the compliance class ends the call", async () => {
    const h = await held(transfer(9000))
    const effects = bank.effects
    expect((await zoe.attest({ ...bindingOf(h), class: "compliance", decision: "reject" })).disposition).toBe("accepted")
    const f = await eventually(async () => {
      const x = await facts(h.held_id)
      return x["lifecycle"] === "denied" ? x : undefined
    })
    expect(f["reasons"]).toEqual([{ by: "compliance:zoe", reason: "veto by compliance witness compliance:zoe" }])
    expect(await carol.attest({ ...bindingOf(h), class: "human", decision: "approve" })).toMatchObject({ status: 409, disposition: "stale" })
    expect(bank.effects).toBe(effects)
    expect(await alice.result(h.held_id)).toMatchObject({ outcome: "denied", result: null })
  })

  it("quorum(2 of 3): one approval waits, the second releases", async () => {
    const h = await held(op("quorum_op"))
    await carol.attest({ ...bindingOf(h), class: "human", decision: "approve" })
    await new Promise((r) => setTimeout(r, 300))
    expect(await facts(h.held_id)).toMatchObject({ readiness: "unsatisfied", execution: "none" })
    await erin.attest({ ...bindingOf(h), class: "human", decision: "approve" })
    await eventually(async () => (await facts(h.held_id))["lifecycle"] === "completed")
    expect(echo.invocations.get(`${h.held_id}:g1`)).toBe(1)
    expect(await dave.attest({ ...bindingOf(h), class: "human", decision: "approve" })).toMatchObject({ disposition: "stale" })
  })

  it("timeout fallback: deny fails closed; route hands the call to the on-call class", async () => {
    const d = await held(op("fallback_deny_op"))
    const r = await held(op("fallback_route_op"))
    const denied = await eventually(async () => {
      const x = await facts(d.held_id)
      return x["lifecycle"] === "denied" ? x : undefined
    })
    expect((denied["reasons"] as Array<{ reason: string }>)[0]!.reason).toContain("fallback: deny")
    expect(echo.invocations.get(`${d.held_id}:g1`)).toBeUndefined()
    await eventually(async () => JSON.stringify((await facts(r.held_id))["active_rule"]) === JSON.stringify({ class: "oncall" }))
    expect(await olga.attest({ ...bindingOf(r), class: "oncall", decision: "approve" })).toMatchObject({ disposition: "accepted" })
    await eventually(async () => (await facts(r.held_id))["lifecycle"] === "completed")
    expect(echo.invocations.get(`${r.held_id}:g1`)).toBe(1)
  })

  it("expiry ends an open call with no effect; cancel is idempotent and refused after dispatch", async () => {
    const e = await held(transfer(9100, { preferences: { expires_in_ms: 400 } }))
    await eventually(async () => (await facts(e.held_id))["lifecycle"] === "expired")
    expect(await carol.attest({ ...bindingOf(e), class: "human", decision: "approve" })).toMatchObject({ disposition: "stale" })
    expect(await alice.result(e.held_id)).toMatchObject({ outcome: "expired", result: null })

    const c = await held(transfer(9200))
    expect(await alice.cancel(c.held_id)).toEqual({ status: 200, lifecycle: "cancelled" })
    expect(await alice.cancel(c.held_id)).toEqual({ status: 200, lifecycle: "cancelled" })
    expect(await carol.attest({ ...bindingOf(c), class: "human", decision: "approve" })).toMatchObject({ disposition: "stale" })
    expect(await alice.result(c.held_id)).toMatchObject({ outcome: "cancelled" })

    const done = await alice.propose(transfer(50) as never)
    expect(done.status).toBe(200)
    expect(await alice.cancel((done as { held_id: string }).held_id)).toMatchObject({ status: 409, error: { code: "already_dispatched" } })
  })

  it("result delivery retries until acknowledged: the offline agent gets one logical result, the bank one effect", async () => {
    const h = await held(transfer(9300))
    const effects = bank.effects
    await carol.attest({ ...bindingOf(h), class: "human", decision: "approve" })
    // Nobody listens or acknowledges: the kernel republishes with backoff (1 s, 2 s, ...).
    await eventually(async () => ((await facts(h.held_id))["continuation_delivery"] === "delivered" ? true : undefined))
    await eventually(async () => (await eventsOf(kernelConn, h.held_id)).filter((e) => e.type === "delivery.published").length >= 2, 8000)
    // The agent comes back as a new process (a new connection): it reads the stream, gets the result, acknowledges.
    const back = await connectAs(nats.servers, "agent")
    const d = await clientFor(back, "agent:alice").result(h.held_id).finally(() => back.close())
    expect(d).toMatchObject({ outcome: "completed", admission: "admitted", result: { amount: 9300 } })
    await eventually(async () => (await facts(h.held_id))["continuation_delivery"] === "acknowledged")
    const events = await eventsOf(kernelConn, h.held_id)
    const ids = new Set(events.filter((e) => e.type === "delivery.published").map((e) => (e as { delivery_id: string }).delivery_id))
    expect(ids).toEqual(new Set([d.delivery_id]))
    expect(events.filter((e) => e.type === "effect.dispatched")).toHaveLength(1)
    expect(bank.effects - effects).toBe(1)
    const attempts = events.filter((e) => e.type === "delivery.published").length
    await new Promise((r) => setTimeout(r, 2500))
    expect((await eventsOf(kernelConn, h.held_id)).filter((e) => e.type === "delivery.published").length).toBe(attempts)
  })
})
