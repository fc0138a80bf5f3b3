import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import type { ProposeInput, WitnessClient } from "../../runtime/client/Client.js"
import type { JsonObject } from "../../runtime/schema/Json.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { EchoTool } from "../support/EchoTool.js"
import { eventsOf, eventually } from "../support/Stream.js"
import { failedChecks, replayAs } from "../audit/support.js"

// Nested holds (design invariant 7) through the protocol: a witness provider proposes its own
// governed call with `parent_held_id`; the parent stays parked until it ends.
let nats: TestNats
let kernel: InProcessKernel
let echo: EchoTool
let agentConn: NatsConnection
let witnessConn: NatsConnection
let toolConn: NatsConnection
let echoConn: NatsConnection
let kernelConn: NatsConnection
let alice: WitnessClient
let fraud: WitnessClient
let olga: WitnessClient
let carol: WitnessClient
let dave: WitnessClient
let fraudWitness: WitnessClient
let olgaWitness: WitnessClient

const Bound = 2
const rules: Profile["rules"] = {
  // The transfer needs a human and the fraud service; the fraud service's check is itself governed.
  money_transfer: { always_witness: true, contract: { rule: { all: [{ class: "human" }, { class: "fraud" }] } } },
  fraud_check: { always_witness: true, contract: { rule: { class: "oncall" } } },
  account_history: { always_witness: true, contract: { rule: { class: "human" } } },
  ledger_scan: { always_witness: true, contract: { rule: { class: "human" } } }
}
const grants = {
  "agent:alice": ["money_transfer"],
  "svc:fraud": ["fraud_check"],
  "oncall:olga": ["account_history", "ledger_scan"]
}
const profile = testProfile({ rules, grants, max_dependency_depth: Bound })

let n = 0
const call = (tool: string, args: JsonObject, parent?: string): ProposeInput => ({
  session_id: "s-nested",
  turn_id: "t1",
  call_id: `n${++n}`,
  tool,
  args,
  ...(parent !== undefined ? { parent_held_id: parent } : {})
})

type Held = { status: number; held_id: string; outcome: string; reasons?: Array<{ by: string; reason: string }> }
const propose = async (who: WitnessClient, c: ProposeInput): Promise<Held> => (await who.propose(c)) as unknown as Held
const held = async (who: WitnessClient, c: ProposeInput): Promise<string> => {
  const r = await propose(who, c)
  expect(r, JSON.stringify(r)).toMatchObject({ status: 202, outcome: "held" })
  return r.held_id
}
// Over the kernel's login: the chain's calls are proposed by three principals (an agent reads its own only).
const facts = async (id: string) => (await clientFor(kernelConn, "admin:root").get(id)).held as unknown as Record<string, unknown> & { reasons: Array<{ reason: string }> }
const ended = (id: string, lifecycle: string) =>
  eventually(async () => {
    const f = await facts(id)
    return f["lifecycle"] === lifecycle ? f : undefined
  })
const effectsOf = async (id: string) => (await eventsOf(kernelConn, id)).filter((e) => e.type === "effect.recorded")

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [profile])
  toolConn = await connectAs(nats.servers, "bank")
  echoConn = await connectAs(nats.servers, "echo")
  echo = new EchoTool(["money_transfer", "fraud_check", "account_history", "ledger_scan"]).serve((tool) => (tool === "money_transfer" ? toolConn : echoConn))
  agentConn = await connectAs(nats.servers, "agent")
  witnessConn = await connectAs(nats.servers, "witness")
  kernelConn = await connectAs(nats.servers, "kernel")
  alice = clientFor(agentConn, "agent:alice")
  fraud = clientFor(agentConn, "svc:fraud")
  olga = clientFor(agentConn, "oncall:olga")
  carol = clientFor(witnessConn, "user:carol")
  dave = clientFor(witnessConn, "user:dave")
  fraudWitness = clientFor(witnessConn, "svc:fraud")
  olgaWitness = clientFor(witnessConn, "oncall:olga")
})

afterAll(async () => {
  await kernel?.stop()
  echo?.stop()
  await Promise.all([agentConn, witnessConn, toolConn, echoConn, kernelConn].map((c) => c?.close()))
  await nats?.dispose()
})

describe("nested holds", () => {
  it("a depth-2 chain resolves bottom up: P waits on C1, C1 on C2; when C2 completes C1 runs, then P; one effect each", async () => {
    const p = await held(alice, call("money_transfer", { from: "acct-1", to: "shop", amount: 5000 }))
    const c1 = await held(fraud, call("fraud_check", { account: "acct-1" }, p))
    const c2 = await held(olga, call("account_history", { account: "acct-1", days: 90 }, c1))
    expect(await facts(c2)).toMatchObject({ parent_held_id: c1, dependency_depth: 2 })
    // A nested call never outlives the call it serves.
    const [fp0, fc2] = [await facts(p), await facts(c2)]
    expect(Date.parse(String(fc2["expires_at"]))).toBeLessThanOrEqual(Date.parse(String(fp0["expires_at"])))

    // Every witness of P and C1 approves; they still wait (parked, no worker) on their dependencies.
    expect((await carol.decide(p, "human")).disposition).toBe("accepted")
    expect((await fraudWitness.decide(p, "fraud")).disposition).toBe("accepted")
    expect((await olgaWitness.decide(c1, "oncall")).disposition).toBe("accepted")
    await new Promise((r) => setTimeout(r, 500))
    expect(await facts(p)).toMatchObject({ lifecycle: "open", readiness: "unsatisfied", execution: "none", dependencies: [{ held_id: c1, status: "pending" }] })
    expect(await facts(c1)).toMatchObject({ lifecycle: "open", readiness: "unsatisfied", execution: "none", dependencies: [{ held_id: c2, status: "pending" }] })

    // C2's witness releases the bottom of the chain.
    expect((await dave.decide(c2, "human")).disposition).toBe("accepted")
    await ended(c2, "completed")
    await ended(c1, "completed")
    const fp = await ended(p, "completed")
    expect(fp).toMatchObject({ execution: "effect-recorded", dependencies: [{ held_id: c1, status: "resolved", outcome: "completed" }] })
    const [e2, e1, e0] = await Promise.all([c2, c1, p].map(effectsOf))
    expect([e2!.length, e1!.length, e0!.length]).toEqual([1, 1, 1])
    // Stream order: C2's effect, then C1 is resolved and runs, then P.
    const dispatchedSeq = async (id: string) => (await eventsOf(kernelConn, id)).find((e) => e.type === "effect.dispatched")!.seq
    const resolvedSeq = async (id: string) => (await eventsOf(kernelConn, id)).find((e) => e.type === "dependency.resolved")!.seq
    expect(e2![0]!.seq).toBeLessThan(await resolvedSeq(c1))
    expect(await resolvedSeq(c1)).toBeLessThan(await dispatchedSeq(c1))
    expect(e1![0]!.seq).toBeLessThan(await resolvedSeq(p))
    expect(await resolvedSeq(p)).toBeLessThan(await dispatchedSeq(p))
    for (const id of [c2, c1]) expect((await eventsOf(kernelConn, id)).map((e) => e.type)).toContain("dependency.reported")
    for (const id of [p, c1, c2]) expect([...echo.invocations.entries()].filter(([k]) => k.startsWith(id)).map(([, v]) => v)).toEqual([1])
  })

  it("the same call under a new held id is no cycle: it is adjudicated on its own, and a witness's failed child counts only as that witness's reject", async () => {
    const args = { from: "acct-2", to: "shop", amount: 7000 }
    const a = await held(alice, call("money_transfer", args))
    const b = await held(fraud, call("fraud_check", { account: "acct-2" }, a))
    // The fraud service proposes A's very call again, as B's dependency: a new call, which it has no grant for.
    const again = await propose(fraud, call("money_transfer", args, b))
    expect(again.status).toBe(403)
    expect(again.reasons?.[0]?.reason).toBe("principal 'svc:fraud' has no capability for tool 'money_transfer'")
    // B's own proposer attached it: B fails closed.
    const fb = await ended(b, "denied")
    expect(fb.reasons[0]!.reason).toBe(`dependency ${again.held_id} ended denied: ${again.reasons![0]!.reason}`)
    // B was the fraud witness's child of A: its reject. A needs a fraud witness and has no other: denied, naming it.
    const fa = await ended(a, "denied")
    expect(fa["reasons"]).toEqual([{ by: "svc:fraud", reason: `dependency ${b} ended denied: ${fb.reasons[0]!.reason}` }])
    for (const id of [a, b, again.held_id]) expect(await effectsOf(id)).toEqual([])
  })

  it("the same call proposed again under its own dependency (held id in the chain) is a cycle; a root call cannot become a child", async () => {
    const a = call("money_transfer", { from: "acct-5", to: "shop", amount: 3000 })
    const aId = await held(alice, a)
    const bId = await held(alice, call("money_transfer", { from: "acct-5", to: "savings", amount: 10 }, aId))
    const again = await propose(alice, { ...a, parent_held_id: bId })
    expect(again.held_id).toBe(aId)
    expect(again.status).toBe(403)
    expect(again.reasons?.[0]?.reason).toMatch(new RegExp(`^dependency cycle: ${aId} -> ${bId} -> ${aId}`))
    expect((await ended(bId, "denied")).reasons[0]!.reason).toMatch(/^dependency cycle: /)
    expect((await ended(aId, "denied")).reasons[0]!.reason).toMatch(new RegExp(`^dependency ${bId} ended denied: dependency cycle: `))
    // An existing root call re-proposed under some parent: refused, it would change a settled chain.
    const root = call("money_transfer", { from: "acct-6", to: "shop", amount: 3000 })
    await held(alice, root)
    const other = await held(alice, call("money_transfer", { from: "acct-7", to: "shop", amount: 3000 }))
    expect(await alice.propose({ ...root, parent_held_id: other })).toMatchObject({ status: 409, error: { code: "dependency_mismatch" } })
    expect(await facts(other)).not.toHaveProperty("dependencies")
  })

  it(`a chain deeper than max_dependency_depth (${Bound}) fails closed with the bound reason, up the chain`, async () => {
    const p = await held(alice, call("money_transfer", { from: "acct-3", to: "shop", amount: 9000 }))
    const c1 = await held(fraud, call("fraud_check", { account: "acct-3" }, p))
    const c2 = await held(olga, call("account_history", { account: "acct-3", days: 30 }, c1))
    const c3 = await propose(olga, call("ledger_scan", { account: "acct-3" }, c2))
    const reason = `dependency depth 3 exceeds max_dependency_depth ${Bound}`
    expect(c3).toMatchObject({ status: 403, outcome: "denied", reasons: [{ by: "kernel", reason }] })
    expect((await ended(c2, "denied")).reasons).toEqual([{ by: "kernel", reason }])
    expect((await ended(c1, "denied")).reasons[0]!.reason).toBe(`dependency ${c2} ended denied: ${reason}`)
    expect((await ended(p, "denied")).reasons[0]!.reason).toBe(`dependency ${c1} ended denied: dependency ${c2} ended denied: ${reason}`)
    for (const id of [p, c1, c2, c3.held_id]) expect(await effectsOf(id)).toEqual([])
  })

  it("only the parent's proposer or an admitted witness may attach; an ended parent takes no new dependency", async () => {
    const p = await held(alice, call("money_transfer", { from: "acct-4", to: "shop", amount: 100 }))
    expect((await propose(olga, call("account_history", { account: "acct-4" }, p))).status).toBe(403)
    expect((await alice.cancel(p)).status).toBe(200)
    const late = (await fraud.propose(call("fraud_check", { account: "acct-4" }, p))) as unknown as { status: number; error: { code: string } }
    expect(late).toMatchObject({ status: 409, error: { code: "parent_cancelled" } })
    expect((await propose(fraud, call("fraud_check", { account: "acct-4" }, "h_" + "0".repeat(32)))).status).toBe(404)
  })

  it("waiting is durable: a kernel restarted while the parent waits still releases it when the child completes", async () => {
    const p = await held(alice, call("money_transfer", { from: "acct-8", to: "shop", amount: 4000 }))
    const c1 = await held(fraud, call("fraud_check", { account: "acct-8" }, p))
    expect((await carol.decide(p, "human")).disposition).toBe("accepted")
    expect((await fraudWitness.decide(p, "fraud")).disposition).toBe("accepted")
    await kernel.stop()
    kernel = await startKernel(nats.servers, [profile])
    expect(await facts(p)).toMatchObject({ lifecycle: "open", execution: "none", dependencies: [{ held_id: c1, status: "pending" }] })
    expect((await olgaWitness.decide(c1, "oncall")).disposition).toBe("accepted")
    await ended(c1, "completed")
    expect(await ended(p, "completed")).toMatchObject({ dependencies: [{ held_id: c1, status: "resolved", outcome: "completed" }] })
    for (const id of [p, c1]) expect(await effectsOf(id)).toHaveLength(1)
  })

  it("the auditor's replay of these histories re-derives every decision: no check fails", async () => {
    const r = await replayAs(nats.servers, "auditor")
    expect(failedChecks(r), JSON.stringify(r.checks.filter((c) => c.status === "failed"), null, 1)).toEqual([])
  })
})
