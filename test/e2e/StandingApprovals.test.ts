import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { WitnessClient } from "../../runtime/client/Client.js"
import { devKeyPair } from "../../runtime/client/DevKeys.js"
import type { StandingScope } from "../../runtime/schema/StandingGrant.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventually } from "../support/Stream.js"
import { checkOf, copyStream, failedChecks, readAll, replayAs, type CopiedMessage } from "../audit/support.js"
import { signEnvelope } from "../../runtime/schema/EnvelopeSignature.js"

// Standing approvals: a witness signs a bounded grant in advance; the kernel applies it to
// matching calls when they are held, as that witness's approval, at most max_uses times
// whatever the concurrency, never past a DENY or a veto, and not after it is revoked.
let nats: TestNats
let kernel: InProcessKernel
let bank: DemoBank
let conns: Array<NatsConnection> = []
let alice: WitnessClient
let bob: WitnessClient
let carol: WitnessClient
let dave: WitnessClient
let zoe: WitnessClient
let root: WitnessClient

const hours = (h: number) => new Date(Date.now() + h * 3_600_000)
const toBob: StandingScope = { principals: ["agent:alice"], tool: "money_transfer", args: { from: { any: true }, to: { eq: "bob" }, amount: { max: 5_000 } } }
let n = 0
const propose = async (who: WitnessClient, args: Record<string, unknown>, tool = "money_transfer") =>
  (await who.propose({ session_id: "s-standing", turn_id: "t1", call_id: `c${++n}`, tool, args: args as never })) as { status: number; held_id: string; verdict?: string }
const facts = async (heldId: string) => (await carol.get(heldId)).held as unknown as Record<string, unknown> & { lifecycle: string; evidence: ReadonlyArray<{ witness: string; standing?: string }> }

beforeAll(async () => {
  nats = await startTestNats()
  const base = testProfile()
  kernel = await startKernel(nats.servers, [
    testProfile({
      grants: { ...base.grants, "agent:alice": [...(base.grants?.["agent:alice"] ?? []), "wire_transfer"] },
      rules: { ...base.rules, wire_transfer: { always_witness: true, contract: { rule: { all: [{ class: "human" }, { class: "fraud" }] }, veto: ["compliance"] } } }
    })
  ])
  const toolConn = await connectAs(nats.servers, "bank")
  bank = new DemoBank().serve(toolConn)
  const agentConn = await connectAs(nats.servers, "agent")
  const witnessConn = await connectAs(nats.servers, "witness")
  conns = [toolConn, agentConn, witnessConn]
  alice = clientFor(agentConn, "agent:alice")
  bob = clientFor(agentConn, "agent:bob")
  carol = clientFor(witnessConn, "user:carol")
  dave = clientFor(witnessConn, "user:dave")
  zoe = clientFor(witnessConn, "compliance:zoe")
  root = clientFor(witnessConn, "admin:root")
}, 60_000)

afterAll(async () => {
  await kernel?.stop()
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
})

describe("standing approvals", () => {
  it("a grant releases a matching held call as the witness's approval, recorded on the call and on the grant", async () => {
    const g = await carol.grantStanding({ grantId: "alice-to-bob", class: "human", scope: toBob, maxUses: 10, expiresAt: hours(2), reason: "payroll run" })
    expect(g).toMatchObject({ status: 201, disposition: "recorded", grant_id: "alice-to-bob", max_uses: 10, uses: [] })
    const before = bank.effects
    const r = await propose(alice, { from: "acct-1", to: "bob", amount: 2_000 })
    await eventually(async () => (await facts(r.held_id)).lifecycle === "completed")
    expect(bank.effects).toBe(before + 1)
    const f = await facts(r.held_id)
    expect(f.evidence).toEqual([expect.objectContaining({ witness: "user:carol", standing: "alice-to-bob" })])
    const list = await carol.standing()
    expect(list.grants?.find((x) => x.grant_id === "alice-to-bob")?.uses).toEqual([expect.objectContaining({ held_id: r.held_id, generation: 1 })])
    // The agent it covers sees it too; another witness does not.
    expect((await alice.standing()).grants?.map((x) => x.grant_id)).toContain("alice-to-bob")
    expect((await dave.standing()).grants?.map((x) => x.grant_id)).not.toContain("alice-to-bob")
  })

  it("a call outside the scope (another payee, a larger amount, another agent) stays held for a witness", async () => {
    const outside = [
      await propose(alice, { from: "acct-2", to: "eve", amount: 2_000 }),
      await propose(alice, { from: "acct-3", to: "bob", amount: 6_000 }),
      await propose(bob, { from: "acct-4", to: "bob", amount: 2_000 })
    ]
    for (const r of outside) {
      expect(r.status).toBe(202)
      const f = await facts(r.held_id)
      expect(f.lifecycle).toBe("open")
      expect(f.evidence).toEqual([])
    }
    // A person can still approve one of them the usual way.
    expect((await carol.decide(outside[0]!.held_id, "human")).status).toBe(202)
    await eventually(async () => (await facts(outside[0]!.held_id)).lifecycle === "completed")
  })

  it("max_uses holds under concurrent holds: 8 calls at once, exactly 3 released by a 3-use grant", async () => {
    const scope: StandingScope = { principals: ["agent:alice"], tool: "money_transfer", args: { from: { any: true }, to: { eq: "shop" }, amount: { any: true } } }
    expect((await carol.grantStanding({ grantId: "three-to-shop", class: "human", scope, maxUses: 3, expiresAt: hours(1) })).status).toBe(201)
    const before = bank.effects
    const calls = await Promise.all(Array.from({ length: 8 }, (_, i) => propose(alice, { from: `race-${i}`, to: "shop", amount: 1_500 })))
    await eventually(async () => bank.effects === before + 3)
    const states = await Promise.all(calls.map((c) => facts(c.held_id)))
    expect(states.filter((s) => s.lifecycle === "completed")).toHaveLength(3)
    expect(states.filter((s) => s.lifecycle === "open")).toHaveLength(5)
    const uses = (await carol.standing()).grants!.find((x) => x.grant_id === "three-to-shop")!.uses
    expect(new Set(uses.map((u) => u.held_id)).size).toBe(3)
    expect(bank.effects).toBe(before + 3)
  })

  it("never past a DENY: a call above the deny bound is denied although a grant covers its amount", async () => {
    const scope: StandingScope = { principals: ["agent:alice"], tool: "money_transfer", args: { from: { any: true }, to: { eq: "whale" }, amount: { any: true } } }
    expect((await carol.grantStanding({ grantId: "whale", class: "human", scope, maxUses: 5, expiresAt: hours(1) })).status).toBe(201)
    const r = await propose(alice, { from: "acct-5", to: "whale", amount: 200_000 })
    expect(r.status).toBe(403)
    expect((await carol.standing()).grants!.find((x) => x.grant_id === "whale")!.uses).toEqual([])
  })

  it("never past a veto: the grant's approval counts, and a compliance reject still denies the call", async () => {
    const scope: StandingScope = { principals: ["agent:alice"], tool: "wire_transfer", args: { to: { any: true }, amount: { any: true } } }
    expect((await carol.grantStanding({ grantId: "wires", class: "human", scope, maxUses: 5, expiresAt: hours(1) })).status).toBe(201)
    const r = await propose(alice, { to: "offshore", amount: 10 }, "wire_transfer")
    expect(r.status).toBe(202)
    expect((await facts(r.held_id)).evidence).toEqual([expect.objectContaining({ witness: "user:carol", standing: "wires" })])
    expect((await zoe.decide(r.held_id, "compliance", "reject", "sanctioned payee")).status).toBe(202)
    await eventually(async () => (await facts(r.held_id)).lifecycle === "denied")
  })

  it("revoked: no later hold takes a use; only the granting witness or an admin may revoke", async () => {
    const scope: StandingScope = { principals: ["agent:alice"], tool: "money_transfer", args: { from: { any: true }, to: { in: ["landlord"] }, amount: { any: true } } }
    expect((await carol.grantStanding({ grantId: "rent", class: "human", scope, maxUses: 12, expiresAt: hours(1) })).status).toBe(201)
    expect((await dave.revokeStanding("rent"))).toMatchObject({ status: 403 })
    expect(await carol.revokeStanding("rent", "moved out")).toMatchObject({ status: 200, disposition: "revoked", revoked_by: "user:carol" })
    expect(await carol.revokeStanding("rent")).toMatchObject({ status: 200, disposition: "duplicate" })
    const r = await propose(alice, { from: "acct-6", to: "landlord", amount: 1_200 })
    expect(r.status).toBe(202)
    expect((await facts(r.held_id)).evidence).toEqual([])
    expect((await carol.grantStanding({ grantId: "rent-2", class: "human", scope, maxUses: 1, expiresAt: hours(1) })).status).toBe(201)
    expect(await root.revokeStanding("rent-2")).toMatchObject({ status: 200, disposition: "revoked", revoked_by: "admin:root" })
  })

  it("refuses grants that would widen authority: for oneself, unbounded, a class not held, a taken id, a forged signature", async () => {
    const self: StandingScope = { principals: ["user:carol"], tool: "money_transfer" }
    expect(await carol.grantStanding({ grantId: "self", class: "human", scope: self, maxUses: 1, expiresAt: hours(1) })).toMatchObject({ status: 422 })
    expect(await carol.grantStanding({ grantId: "forever", class: "human", scope: toBob, maxUses: 1, expiresAt: hours(24 * 365) })).toMatchObject({ status: 422 })
    expect(await carol.grantStanding({ grantId: "as-fraud", class: "fraud", scope: toBob, maxUses: 1, expiresAt: hours(1) })).toMatchObject({ status: 422 })
    expect(await dave.grantStanding({ grantId: "alice-to-bob", class: "human", scope: toBob, maxUses: 1, expiresAt: hours(1) })).toMatchObject({ status: 409 })
    // An agent signs a grant naming carol: its key is not carol's, so the kernel refuses it unread.
    const asCarol = WitnessClient.over(conns[2]!, { principal: "user:carol", secretKey: devKeyPair("agent:mallory").secretKey })
    expect(await asCarol.grantStanding({ grantId: "forged", class: "human", scope: { principals: ["agent:mallory"], tool: "money_transfer" }, maxUses: 9, expiresAt: hours(1) })).toMatchObject({ status: 401 })
    expect((await root.standing()).grants!.map((g) => g.grant_id)).not.toContain("forged")
  })

  it("the auditor re-derives every use: the replay is clean", async () => {
    const report = await replayAs(nats.servers, "auditor")
    expect(failedChecks(report)).toEqual([])
  })
})

describe("a forged standing history fails the audit (rebuilt with the kernel's credentials)", () => {
  let original: Array<CopiedMessage>
  let kernelConn: NatsConnection
  const grantSubject = (id: string) => `wk.v1.events._standing.${id}`
  const replayCopy = async (edit: (ms: Array<CopiedMessage>) => Array<CopiedMessage>) =>
    replayAs(nats.servers, "kernel", { stream: await copyStream(kernelConn, original, edit), factsBucket: null, sessionsStream: null })
  const lastRecord = (ms: Array<CopiedMessage>, id: string) => ms.filter((m) => m.subject === grantSubject(id)).at(-1)!

  beforeAll(async () => {
    kernelConn = await connectAs(nats.servers, "kernel")
    conns.push(kernelConn)
    original = await readAll(kernelConn)
  })

  it("an unmodified copy passes, standing included", async () => {
    const r = await replayCopy((ms) => ms)
    expect(failedChecks(r)).toEqual([])
    expect(checkOf(r, "standing").checked).toBeGreaterThan(0)
  })

  it("a fourth use added to a three-use grant -> standing", async () => {
    const r = await replayCopy((ms) => {
      const last = lastRecord(ms, "three-to-shop")
      const uses = last.body["uses"] as Array<Record<string, unknown>>
      return [...ms, { subject: last.subject, body: { ...last.body, uses: [...uses, { ...uses[0]!, held_id: "h_forged" }] } }]
    })
    expect(failedChecks(r)).toContain("standing")
    expect(checkOf(r, "standing").violations.map((v) => v.message).join("\n")).toContain("4 uses of a grant of 3")
  })

  it("a grant's records removed while calls still name it -> standing", async () => {
    const r = await replayCopy((ms) => ms.filter((m) => m.subject !== grantSubject("alice-to-bob")))
    expect(checkOf(r, "standing").violations.some((v) => v.message.includes("alice-to-bob"))).toBe(true)
  })

  it("a grant re-signed by another key in the witness's name -> standing", async () => {
    const forged = signEnvelope({ op: "standing.grant", principal: "user:carol", class: "human", grant_id: "forged-grant", scope: { principals: ["agent:alice"], tool: "money_transfer" }, max_uses: 100, issued_at: new Date().toISOString(), expires_at: hours(1).toISOString(), nonce: "forged-nonce-1" }, devKeyPair("agent:mallory").secretKey)
    const r = await replayCopy((ms) => [...ms, { subject: grantSubject("forged-grant"), body: { type: "standing.granted", grant_id: "forged-grant", grant_digest: "x", grant: forged, uses: [], at: new Date().toISOString() } }])
    const messages = checkOf(r, "standing").violations.filter((v) => v.held_id === "_standing.forged-grant").map((v) => v.message)
    expect(messages.some((m) => m.includes("not registered to user:carol"))).toBe(true)
  })

  it("a call's standing approval moved to another grant's use -> standing", async () => {
    const r = await replayCopy((ms) => ms.map((m) => (m.body["type"] === "standing.applied" && m.body["grant_id"] === "three-to-shop" && m.body["use"] === 1 ? { ...m, body: { ...m.body, use: 2 } } : m)))
    expect(checkOf(r, "standing").violations.some((v) => v.message.includes("use 2 of grant three-to-shop is not this call's"))).toBe(true)
  })
})
