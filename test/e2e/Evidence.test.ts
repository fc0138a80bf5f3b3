import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { devPublicKey } from "../../runtime/client/DevKeys.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { EchoTool } from "../support/EchoTool.js"
import { eventsOf, eventually } from "../support/Stream.js"
import { failedChecks, replayAs } from "../audit/support.js"

// Evidence as an attacker would bend it, through the protocol against a real nats-server and an
// in-process kernel: each attacker uses only its own key and a shared NATS role of nats.conf.
let nats: TestNats
let kernel: InProcessKernel
let echo: EchoTool
let agentConn: NatsConnection
let witnessConn: NatsConnection
let toolConn: NatsConnection
let kernelConn: NatsConnection
let alice: WitnessClient
let carol: WitnessClient
let dave: WitnessClient
let erin: WitnessClient
let hank: WitnessClient
let fraud: WitnessClient
let zoe: WitnessClient
let root: WitnessClient

const ops = ["two_humans_op", "human_op", "human_and_fraud_op", "quorum_op", "carol_op"]
const rules: Profile["rules"] = {
  two_humans_op: { always_witness: true, contract: { rule: { class: "human", count: 2 } } },
  human_op: { always_witness: true, contract: { rule: { class: "human" }, veto: ["compliance"] } },
  human_and_fraud_op: { always_witness: true, contract: { rule: { all: [{ class: "human" }, { class: "fraud" }] } } },
  quorum_op: { always_witness: true, contract: { rule: { quorum: { n: 2, of: [{ class: "human" }, { class: "fraud" }] } } } },
  carol_op: { always_witness: true, contract: { rule: { principal: "user:carol" } } }
}
const base = testProfile({ rules, grants: { "agent:alice": ops } })
// Hank is one person registered as both a human approver and a fraud analyst.
const profile: Profile = { ...base, principals: { ...base.principals, "user:hank": { keys: [devPublicKey("user:hank")], classes: ["human", "fraud"] } } }

let n = 0
const call = (tool: string) => ({ session_id: "s-evidence", turn_id: "t1", call_id: `e${++n}`, tool, args: { n } })
type Held = { status: 202; held_id: string; call_digest: string; generation: number; witness_request: { contract_digest: string; presentation: Record<string, unknown> } }
const held = async (tool: string): Promise<Held> => {
  const r = await alice.propose(call(tool) as never)
  expect(r.status, JSON.stringify(r)).toBe(202)
  return r as Held
}
const bindingOf = (h: Held) => ({ held_id: h.held_id, generation: h.generation, call_digest: h.call_digest, contract_digest: h.witness_request.contract_digest })
const facts = async (id: string) => (await alice.get(id)).held as Record<string, unknown>
const lifecycle = async (id: string) => (await facts(id))["lifecycle"]
const runs = (h: Held) => echo.invocations.get(`${h.held_id}:g${h.generation}`) ?? 0
/** Where the first event of a type is in a call's history, in address order (seq, index); undefined when absent. */
const seqOf = async (id: string, type: string, match: (e: Record<string, unknown>) => boolean = () => true) => {
  const at = (await eventsOf(kernelConn, id)).findIndex((e) => e.type === type && match(e as unknown as Record<string, unknown>))
  return at < 0 ? undefined : at
}
/** Watches a condition that must not become true for `ms` (the kernel drives a call within milliseconds of an attestation). */
const stays = async (what: string, bad: () => Promise<boolean>, ms = 1500) => {
  const until = Date.now() + ms
  while (Date.now() < until) {
    if (await bad()) throw new Error(what)
    await new Promise((r) => setTimeout(r, 50))
  }
}
const approve = (w: WitnessClient, h: Held, klass = "human", extra: Record<string, unknown> = {}) => w.attest({ ...bindingOf(h), class: klass, decision: "approve", ...extra })

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [profile])
  toolConn = await connectAs(nats.servers, "echo")
  echo = new EchoTool(ops).serve(toolConn)
  agentConn = await connectAs(nats.servers, "agent")
  witnessConn = await connectAs(nats.servers, "witness")
  kernelConn = await connectAs(nats.servers, "kernel")
  alice = clientFor(agentConn, "agent:alice")
  carol = clientFor(witnessConn, "user:carol")
  dave = clientFor(witnessConn, "user:dave")
  erin = clientFor(witnessConn, "user:erin")
  hank = clientFor(witnessConn, "user:hank")
  fraud = clientFor(witnessConn, "svc:fraud")
  zoe = clientFor(witnessConn, "compliance:zoe")
  root = clientFor(kernelConn, "admin:root")
})

afterAll(async () => {
  await kernel?.stop()
  echo?.stop()
  await Promise.all([agentConn, witnessConn, toolConn, kernelConn].map((c) => c?.close()))
  await nats?.dispose()
})

describe("evidence an attacker cannot bend", () => {
  it("one principal holding both classes satisfies neither (human AND fraud) nor quorum(2, human, fraud) alone", async () => {
    const both = await held("human_and_fraud_op")
    const quorum = await held("quorum_op")
    for (const h of [both, quorum]) {
      expect((await approve(hank, h, "human")).disposition).toBe("accepted")
      expect((await approve(hank, h, "fraud")).disposition).toBe("accepted")
    }
    await stays("a call ran on one principal's two approvals", async () => runs(both) + runs(quorum) > 0)
    // A second, distinct principal completes each rule.
    for (const h of [both, quorum]) {
      expect((await approve(fraud, h, "fraud")).disposition).toBe("accepted")
      await eventually(async () => (await lifecycle(h.held_id)) === "completed")
      expect(runs(h)).toBe(1)
      expect(await seqOf(h.held_id, "effect.dispatched")).toBeGreaterThan((await seqOf(h.held_id, "attestation.accepted", (e) => e["witness"] === "svc:fraud"))!)
    }
  })

  it("a witness's nested call that the kernel denies counts only as that witness's reject; a veto-class witness's is a veto", async () => {
    const h = await held("human_op")
    // Carol, a human witness, attaches a copy of the parent's own call (no grant for her; the same digest).
    const copy = await clientFor(agentConn, "user:carol").propose({ ...call("human_op"), args: (await facts(h.held_id))["args"] as never, parent_held_id: h.held_id })
    expect(copy.status).toBe(403)
    await eventually(async () => ((await facts(h.held_id))["dependencies"] as Array<{ status: string }> | undefined)?.every((d) => d.status !== "pending"))
    await stays("a witness's refused child ended the parent", async () => (await lifecycle(h.held_id)) !== "open", 1000)
    // Her no is final for her; another human still releases the call.
    expect((await approve(carol, h)).disposition).toBe("invalid")
    expect((await approve(dave, h)).disposition).toBe("accepted")
    await eventually(async () => (await lifecycle(h.held_id)) === "completed")
    expect(runs(h)).toBe(1)

    // Zoe holds the veto class: her failed child is her veto.
    const v = await held("human_op")
    expect((await clientFor(agentConn, "compliance:zoe").propose({ ...call("human_op"), parent_held_id: v.held_id })).status).toBe(403)
    const denied = await eventually(async () => {
      const f = await facts(v.held_id)
      return f["lifecycle"] === "denied" ? f : undefined
    })
    expect(denied["reasons"]).toMatchObject([{ by: "compliance:zoe", reason: expect.stringMatching(/^veto by witness compliance:zoe: dependency h_[0-9a-f]{32} ended denied/) }])
    expect(runs(v)).toBe(0)
  })

  it("a revoke wins over an approval that claims a future issued_at; an issued_at beyond the skew is refused", async () => {
    const h = await held("two_humans_op")
    const now = Date.now()
    expect((await approve(carol, h, "human", { issued_at: new Date(now + 50_000).toISOString() })).disposition).toBe("accepted")
    expect((await carol.attest({ ...bindingOf(h), class: "human", decision: "revoke", issued_at: new Date(now).toISOString() })).disposition).toBe("accepted")
    expect((await approve(dave, h)).disposition).toBe("accepted")
    await stays("a revoked approval still counted", async () => runs(h) > 0)
    expect(((await facts(h.held_id))["evidence"] as Array<{ witness: string; decision: string; status: string }>).find((e) => e.witness === "user:carol" && e.decision === "approve")?.status).toBe("revoked")
    expect((await approve(erin, h)).disposition).toBe("accepted")
    await eventually(async () => (await lifecycle(h.held_id)) === "completed")

    const later = await held("two_humans_op")
    const future = await approve(carol, later, "human", { issued_at: new Date(Date.now() + 5 * 60_000).toISOString(), expires_at: new Date(Date.now() + 10 * 60_000).toISOString() })
    expect(future).toMatchObject({ status: 422, disposition: "invalid", reason: expect.stringMatching(/^issued_at .* is more than 60 s in the future/) })
  })

  it("an impossible time is refused with a 400 naming the field; nothing is recorded", async () => {
    const h = await held("human_op")
    const before = (await eventsOf(kernelConn, h.held_id)).length
    for (const field of ["issued_at", "expires_at"] as const) {
      const reply = await carol.request<{ status: number; error: { code: string; path: string; message: string } }>(
        Subjects.attest,
        carol.sign({ op: "attest", ...bindingOf(h), class: "human", decision: "approve", issued_at: new Date().toISOString(), expires_at: new Date(Date.now() + 60_000).toISOString(), nonce: `bad-time-${field}`, [field]: "2026-13-45T99:99:99Z" })
      )
      expect(reply).toMatchObject({ status: 400, error: { code: "invalid_request", path: `payload.${field}` } })
      expect(reply.error.message).toContain("2026-13-45T99:99:99Z")
    }
    expect((await eventsOf(kernelConn, h.held_id)).length).toBe(before)
  })

  it("a reject by the only witness who could approve denies the call at once, with the witness's reason, to the agent", async () => {
    const h = await held("carol_op")
    expect((await carol.decide(h.held_id, "human", "reject", "the payee is not on the vendor list")).disposition).toBe("accepted")
    const delivery = await alice.result(h.held_id, { timeoutMs: 10_000 })
    expect(delivery).toMatchObject({ outcome: "denied", reasons: [{ by: "user:carol", reason: "reject by human witness user:carol: the payee is not on the vendor list" }] })
    const f = await facts(h.held_id)
    expect(f["evidence"]).toMatchObject([{ witness: "user:carol", decision: "reject", status: "valid", reason: "the payee is not on the vendor list" }])
    expect(runs(h)).toBe(0)
  })

  it("a reject is final for its witness; the call waits for the others", async () => {
    const h = await held("human_op")
    expect((await dave.attest({ ...bindingOf(h), class: "human", decision: "reject" })).disposition).toBe("accepted")
    expect(await approve(dave, h)).toMatchObject({ status: 422, disposition: "invalid", reason: expect.stringContaining("already rejected") })
    await stays("a witness turned its reject into an approval", async () => runs(h) > 0, 800)
    expect(await lifecycle(h.held_id)).toBe("open")
    expect((await approve(erin, h)).disposition).toBe("accepted")
    await eventually(async () => (await lifecycle(h.held_id)) === "completed")
  })

  it("an attestation binds the presentation it was shown: another presentation digest is stale, the shown one counts", async () => {
    const h = await held("human_op")
    expect(await approve(carol, h, "human", { presentation_digest: "0".repeat(64) })).toMatchObject({ status: 409, disposition: "stale", reason: expect.stringContaining("presentation") })
    expect((await carol.decide(h.held_id, "human")).disposition).toBe("accepted")
    await eventually(async () => (await lifecycle(h.held_id)) === "completed")
    const accepted = (await eventsOf(kernelConn, h.held_id)).find((e) => e.type === "attestation.accepted") as unknown as { presentation_digest: string }
    expect(accepted.presentation_digest).toMatch(/^[0-9a-f]{64}$/)
  })

  // Last: it changes the registry for the rest of the file.
  it("an approval signed by a key the admin has since removed stops counting", async () => {
    const h = await held("two_humans_op")
    expect((await approve(carol, h)).disposition).toBe("accepted")
    // The admin removes carol's key (she keeps her class): a narrowing, applied at once.
    const narrowed: Profile = { ...profile, principals: { ...profile.principals, "user:carol": { keys: [], classes: ["human"] } } }
    const applied = (await root.applyPolicy(narrowed as never)) as { status: number; policy_epoch: number }
    expect(applied.status).toBe(200)
    await eventually(async () => (await facts(h.held_id))["policy_epoch_checked"] === applied.policy_epoch)
    expect((await approve(dave, h)).disposition).toBe("accepted")
    await stays("an approval by a removed key counted", async () => runs(h) > 0)
    expect((await approve(erin, h)).disposition).toBe("accepted")
    await eventually(async () => (await lifecycle(h.held_id)) === "completed")
    expect(await seqOf(h.held_id, "effect.dispatched")).toBeGreaterThan((await seqOf(h.held_id, "attestation.accepted", (e) => e["witness"] === "user:erin"))!)
  })

  it("the auditor's replay of these histories re-derives every decision: no check fails", async () => {
    const r = await replayAs(nats.servers, "auditor")
    expect(failedChecks(r), JSON.stringify(r.checks.filter((c) => c.status === "failed"), null, 1)).toEqual([])
  })
})
