import { afterAll, beforeAll, describe, expect, it } from "vitest"
import fc from "fast-check"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { canonicalize } from "../../runtime/schema/Canonical.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"

// A model-based test of the command set against a real kernel over NATS. Random sequences of
// propose, edit, attest (approve, reject as a veto), batch, standing grant and revoke, extend,
// cancel and policy apply (by one admin, approved or not by the other) run against a small
// reference model of who may do what. After every step: no call has run without a satisfying set
// of independent approvals of exactly its digest (or, never edited, an ALLOW of a policy in force
// that no single admin widened), no vetoed or cancelled call has run, and the policy in force is
// one that was narrowing or approved by a second admin. A fixed seed and a bounded number of runs;
// fast-check prints the seed and the shrunk sequence when a run fails.

type Witness = "user:carol" | "user:dave" | "svc:fraud" | "op:breakglass" | "compliance:zoe"
const ClassOf: Record<Witness, string> = { "user:carol": "human", "user:dave": "human", "svc:fraud": "fraud", "op:breakglass": "breakglass", "compliance:zoe": "compliance" }
const Witnesses = Object.keys(ClassOf) as ReadonlyArray<Witness>

const transferRule = (witness_above: number) => ({
  amount_field: "amount",
  witness_above,
  deny_above: 100_000,
  contract: { rule: { any: [{ all: [{ class: "human" }, { class: "fraud" }] }, { class: "breakglass" }] }, veto: ["compliance"] }
})
const org = (witness_above: number, extraAdmin = false): Profile =>
  testProfile({ rules: { money_transfer: transferRule(witness_above) }, ...(extraAdmin ? { admins: ["admin:root", "admin:ops", "agent:mallory"] } : {}) })
/** The profiles an admin may send: the organization's, one that loosens, one that narrows, one that makes mallory an admin. */
const Profiles = { base: org(1_000), loose: org(5_000), tight: org(500), mallory: org(1_000, true) } as const
type ProfileName = keyof typeof Profiles
const thresholdOf = (p: Profile) => p.rules!["money_transfer"]!.witness_above!

interface Generation {
  readonly args: { from: string; to: string; amount: number }
  /** The agent and every editor so far: none of their approvals counts. */
  readonly proposers: ReadonlyArray<string>
  readonly approvals: Array<{ witness: string; class: string }>
}
interface ModelCall {
  readonly heldId: string
  readonly generations: Array<Generation>
  vetoed: boolean
  cancelled: boolean
  /** The bank ran it: nothing more can happen to it. */
  ran: boolean
}
interface Model {
  readonly calls: Array<ModelCall>
}
/** Standing grants ever accepted (they outlive a run): who, and the most they approve (to shop). */
const standingGrants = new Map<string, { witness: Witness; max: number }>()
interface Real {
  readonly run: number
}

let nats: TestNats
let kernel: InProcessKernel
let conns: ReadonlyArray<NatsConnection> = []
let alice: WitnessClient
let root: WitnessClient
let ops: WitnessClient
let opsWitness: WitnessClient
let witness: Record<Witness, WitnessClient>
let bank: DemoBank
/** Profiles a legitimate path put in force: the start, every narrowing, every widening a second admin approved. */
const legitimate = new Set<string>([canonicalize(Profiles.base)])
let seq = 0
/** How many times each command ran, so the test can show it exercised the whole set. */
const ran = new Map<string, number>()
const count = (name: string) => ran.set(name, (ran.get(name) ?? 0) + 1)

const policyNow = () => kernel.policy()
const inForce = async () => (await policyNow()).profiles.find((p) => p.name === "test-org")!

/** Whether approvals of one generation, from witnesses independent of its proposers, meet (human AND fraud) OR breakglass. */
const satisfied = (g: Generation): boolean => {
  const counted = g.approvals.filter((a) => !g.proposers.includes(a.witness) && ClassOf[a.witness as Witness] === a.class)
  const by = (c: string) => new Set(counted.filter((a) => a.class === c).map((a) => a.witness))
  return by("breakglass").size > 0 || (by("human").size > 0 && by("fraud").size > 0)
}
const maxLegitimateThreshold = () => Math.max(...[...legitimate].map((p) => thresholdOf(JSON.parse(p) as Profile)))

/** The invariants, checked against what the bank did and the policy in force. */
const checkInvariants = async (m: Model) => {
  const byId = new Map(m.calls.map((c) => [c.heldId, c]))
  for (const [key, t] of bank.byKey) {
    const [heldId, g] = key.split(":g")
    const call = byId.get(heldId!)
    if (call === undefined) continue // a call of an earlier run
    call.ran = true
    const n = Number(g)
    const gen = call.generations[n - 1]
    expect(gen, `${key} ran a generation the model never saw`).toBeDefined()
    expect({ from: t.from, to: t.to, amount: t.amount }, `${key} ran other arguments than its generation's`).toEqual(gen!.args)
    expect(call.vetoed, `${key} ran although compliance vetoed it`).toBe(false)
    expect(call.cancelled, `${key} ran although its agent cancelled it`).toBe(false)
    const unwitnessed = n === 1 && gen!.args.amount <= maxLegitimateThreshold()
    // A standing grant that covers the generation is its witness's approval (generously: whenever it was in force).
    const standing = [...standingGrants.values()].filter((s) => gen!.args.to === "shop" && gen!.args.amount <= s.max).map((s) => ({ witness: s.witness, class: ClassOf[s.witness] }))
    expect(unwitnessed || satisfied({ ...gen!, approvals: [...gen!.approvals, ...standing] }), `${key} ran without a satisfying set of independent approvals: ${JSON.stringify(gen)}`).toBe(true)
  }
  expect(legitimate.has(canonicalize(await inForce())), "a policy is in force that a single admin widened").toBe(true)
}

const open = (m: Model) => m.calls.filter((c) => !c.vetoed && !c.cancelled && !c.ran)
const pick = <T,>(xs: ReadonlyArray<T>, i: number): T | undefined => (xs.length === 0 ? undefined : xs[i % xs.length])

class Propose implements fc.AsyncCommand<Model, Real> {
  readonly name = "Propose"
  constructor(readonly amount: number, readonly to: string) {}
  check = () => true
  async run(m: Model, r: Real) {
    const id = `mb${r.run}-${++seq}`
    const reply = (await alice.propose({ session_id: `s-model-${r.run}`, turn_id: "t", call_id: id, tool: "money_transfer", args: { from: `acct-${id}`, to: this.to, amount: this.amount } })) as { held_id: string }
    m.calls.push({ heldId: reply.held_id, generations: [{ args: { from: `acct-${id}`, to: this.to, amount: this.amount }, proposers: ["agent:alice"], approvals: [] }], vetoed: false, cancelled: false, ran: false })
    await checkInvariants(m)
  }
  toString = () => `propose(${this.amount} to ${this.to})`
}

class Attest implements fc.AsyncCommand<Model, Real> {
  readonly name = "Attest"
  constructor(readonly call: number, readonly who: Witness, readonly asClass: string, readonly decision: "approve" | "reject") {}
  check = (m: Readonly<Model>) => open(m as Model).length > 0
  async run(m: Model) {
    const c = pick(open(m), this.call)!
    const got = await witness[this.who].get(c.heldId)
    const h = got.held
    if (h === undefined || h["lifecycle"] !== "open" || h.contract_digest === null) return
    const reply = await witness[this.who].attest({ held_id: c.heldId, class: this.asClass, decision: this.decision, generation: h.generation, call_digest: h.call_digest, contract_digest: h.contract_digest })
    if (reply.disposition === "accepted") {
      // What the witness signed is the generation the kernel showed: it must be the model's.
      expect(h.generation).toBe(c.generations.length)
      if (this.decision === "approve") c.generations[h.generation - 1]!.approvals.push({ witness: this.who, class: this.asClass })
      if (this.decision === "reject" && this.asClass === "compliance" && ClassOf[this.who] === "compliance") c.vetoed = true
    }
    await checkInvariants(m)
  }
  toString = () => `${this.who} ${this.decision} #${this.call} as ${this.asClass}`
}

class Batch implements fc.AsyncCommand<Model, Real> {
  readonly name = "Batch"
  constructor(readonly calls: ReadonlyArray<number>, readonly who: Witness) {}
  check = (m: Readonly<Model>) => open(m as Model).length > 0
  async run(m: Model) {
    const targets = [...new Set(this.calls.map((i) => pick(open(m), i)!))]
    const gens = await Promise.all(targets.map(async (c) => (await witness[this.who].get(c.heldId)).held?.generation))
    if (gens.some((g) => g === undefined)) return
    const reply = await witness[this.who].attestBatch(targets.map((c) => c.heldId), ClassOf[this.who], "approve", "each").catch(() => undefined)
    for (const [i, c] of targets.entries()) {
      const item = reply?.results?.find((x) => x.held_id === c.heldId)
      if (item?.disposition === "accepted") c.generations[gens[i]! - 1]?.approvals.push({ witness: this.who, class: ClassOf[this.who] })
    }
    await checkInvariants(m)
  }
  toString = () => `${this.who} batch-approves ${this.calls.join(",")}`
}

class Edit implements fc.AsyncCommand<Model, Real> {
  readonly name = "Edit"
  constructor(readonly call: number, readonly who: Witness, readonly amount: number, readonly to: string) {}
  check = (m: Readonly<Model>) => open(m as Model).length > 0
  async run(m: Model) {
    const c = pick(open(m), this.call)!
    const last = c.generations[c.generations.length - 1]!
    const args = { from: last.args.from, to: this.to, amount: this.amount }
    const reply = await witness[this.who].edit(c.heldId, ClassOf[this.who], args).catch(() => undefined)
    if (reply?.status === 202) {
      expect(ClassOf[this.who], "a veto-only witness edited a call").not.toBe("compliance")
      c.generations.push({ args, proposers: [...last.proposers, this.who], approvals: [] })
    }
    await checkInvariants(m)
  }
  toString = () => `${this.who} edits #${this.call} into ${this.amount} to ${this.to}`
}

class Standing implements fc.AsyncCommand<Model, Real> {
  readonly name = "Standing"
  constructor(readonly who: Witness, readonly max: number, readonly revoke: boolean) {}
  check = () => true
  async run(m: Model, r: Real) {
    const grantId = `g-${r.run}-${this.who.replace(/[^a-z]/g, "")}-${this.max}`
    if (this.revoke) {
      await witness[this.who].revokeStanding(grantId).catch(() => undefined)
      // Calls it approved stay approved: the model keeps the grant as a possible approver.
      return checkInvariants(m)
    }
    const reply = await witness[this.who]
      .grantStanding({ grantId, class: ClassOf[this.who], scope: { principals: ["agent:alice"], tool: "money_transfer", args: { amount: { max: this.max }, to: { eq: "shop" }, from: { any: true } } }, maxUses: 5, expiresAt: new Date(Date.now() + 600_000) })
      .catch(() => undefined)
    if (reply !== undefined && reply.status < 300) standingGrants.set(grantId, { witness: this.who, max: this.max })
    await checkInvariants(m)
  }
  toString = () => `${this.who} ${this.revoke ? "revokes" : "grants"} standing up to ${this.max}`
}

class Extend implements fc.AsyncCommand<Model, Real> {
  readonly name = "Extend"
  constructor(readonly call: number, readonly who: Witness) {}
  check = (m: Readonly<Model>) => open(m as Model).length > 0
  async run(m: Model) {
    const c = pick(open(m), this.call)!
    await witness[this.who].extend(c.heldId, ClassOf[this.who], new Date(Date.now() + 30 * 60_000)).catch(() => undefined)
    await checkInvariants(m)
  }
  toString = () => `${this.who} extends #${this.call}`
}

class Cancel implements fc.AsyncCommand<Model, Real> {
  readonly name = "Cancel"
  constructor(readonly call: number) {}
  check = (m: Readonly<Model>) => open(m as Model).length > 0
  async run(m: Model) {
    const c = pick(open(m), this.call)!
    const reply = await alice.cancel(c.heldId, "model").catch(() => undefined)
    if (reply?.lifecycle === "cancelled") c.cancelled = true
    await checkInvariants(m)
  }
  toString = () => `alice cancels #${this.call}`
}

class ApplyPolicy implements fc.AsyncCommand<Model, Real> {
  readonly name = "ApplyPolicy"
  constructor(readonly profile: ProfileName, readonly secondApproves: boolean, readonly proposer: "root" | "ops") {}
  check = () => true
  async run(m: Model) {
    const [by, other] = this.proposer === "root" ? [root, opsWitness] : [ops, rootWitnessClient()]
    const p = Profiles[this.profile]
    const reply = (await by.applyPolicy(p as never)) as { status: number; held_id?: string }
    if (reply.status === 200) legitimate.add(canonicalize(p))
    if (reply.status === 202 && reply.held_id !== undefined) {
      // The proposer's own approval never counts; another admin's does.
      await clientFor(conns[1]!, this.proposer === "root" ? "admin:root" : "admin:ops").decide(reply.held_id, "admin").catch(() => undefined)
      if (this.secondApproves) {
        const d = await other.decide(reply.held_id, "admin").catch(() => undefined)
        if (d?.disposition === "accepted") legitimate.add(canonicalize(p))
      }
    }
    await checkInvariants(m)
  }
  toString = () => `${this.proposer} applies ${this.profile}${this.secondApproves ? " (approved)" : ""}`
}

let rootWitness: WitnessClient
const rootWitnessClient = () => rootWitness

/** A command that counts its runs. */
class Counted implements fc.AsyncCommand<Model, Real> {
  // fast-check hands each command over wrapped (its `cmd`).
  constructor(readonly inner: fc.AsyncCommand<Model, Real, boolean> & { readonly cmd?: { readonly name?: string } }) {}
  // Every command here checks synchronously.
  check = (m: Readonly<Model>) => this.inner.check(m) === true
  run = async (m: Model, r: Real) => {
    count(this.inner.cmd?.name ?? "unknown")
    await this.inner.run(m, r)
  }
  toString = () => this.inner.toString()
}

const witnessArb = fc.constantFrom(...Witnesses)
const commands: Array<fc.Arbitrary<fc.AsyncCommand<Model, Real> & { readonly name: string }>> = [
  fc.tuple(fc.constantFrom(500, 2_500, 4_000), fc.constantFrom("shop", "mallory")).map(([a, to]) => new Propose(a, to)),
  fc.tuple(fc.constantFrom(2_500, 4_000), fc.constantFrom("shop", "mallory")).map(([a, to]) => new Propose(a, to)),
  fc.tuple(fc.nat(9), witnessArb, fc.constantFrom("human", "fraud", "breakglass", "compliance"), fc.constantFrom("approve" as const, "approve" as const, "reject" as const)).map(([i, w, c, d]) => new Attest(i, w, c, d)),
  fc.tuple(fc.array(fc.nat(9), { minLength: 1, maxLength: 3 }), witnessArb).map(([is, w]) => new Batch(is, w)),
  fc.tuple(fc.nat(9), witnessArb, fc.constantFrom(300, 900, 2_500), fc.constantFrom("shop", "mallory")).map(([i, w, a, to]) => new Edit(i, w, a, to)),
  fc.tuple(fc.nat(9), fc.constantFrom<Witness>("user:carol", "svc:fraud", "compliance:zoe"), fc.constantFrom(300, 900)).map(([i, w, a]) => new Edit(i, w, a, "mallory")),
  fc.tuple(witnessArb, fc.constantFrom(1_000, 3_000), fc.boolean()).map(([w, max, revoke]) => new Standing(w, max, revoke)),
  fc.tuple(fc.nat(9), witnessArb).map(([i, w]) => new Extend(i, w)),
  fc.nat(9).map((i) => new Cancel(i)),
  fc.tuple(fc.constantFrom(...(Object.keys(Profiles) as ReadonlyArray<ProfileName>)), fc.boolean(), fc.constantFrom("root" as const, "ops" as const)).map(([p, ok, by]) => new ApplyPolicy(p, ok, by))
]

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [Profiles.base])
  conns = await Promise.all((["kernel", "witness", "agent", "bank"] as const).map((r) => connectAs(nats.servers, r)))
  root = clientFor(conns[0]!, "admin:root")
  ops = clientFor(conns[0]!, "admin:ops")
  rootWitness = clientFor(conns[1]!, "admin:root")
  opsWitness = clientFor(conns[1]!, "admin:ops")
  alice = clientFor(conns[2]!, "agent:alice")
  witness = Object.fromEntries(Witnesses.map((w) => [w, clientFor(conns[1]!, w)])) as Record<Witness, WitnessClient>
  bank = new DemoBank().serve(conns[3]!)
}, 60_000)

afterAll(async () => {
  await kernel?.stop()
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
})

describe("the command set against a reference model of who may do what", () => {
  it("no call runs without independent approvals of its digest, and no single admin widens policy (seed 35, 24 runs)", async () => {
    let run = 0
    await fc.assert(
      fc.asyncProperty(fc.commands(commands, { maxCommands: 24, size: "+1" }), async (cmds) => {
        const r: Real = { run: ++run }
        await fc.asyncModelRun(() => ({ model: { calls: [] } satisfies Model, real: r }), [...cmds].map((c) => new Counted(c)))
      }),
      { numRuns: 24, seed: 35, endOnFailure: true }
    )
    // The runs moved money, so the invariants were checked against effects, not an idle bank,
    // and every command of the set ran.
    expect(bank.effects).toBeGreaterThan(0)
    expect([...ran.keys()].sort()).toEqual(["ApplyPolicy", "Attest", "Batch", "Cancel", "Edit", "Extend", "Propose", "Standing"])
  }, 300_000)
})
