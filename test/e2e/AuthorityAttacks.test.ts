import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventually } from "../support/Stream.js"

// The organization's contract on transfers above 1,000: (human AND fraud) OR breakglass, with a
// compliance veto. Each case is an attacker holding one admin's key (or one witness's), over NATS
// against a real kernel: nothing it does alone gives anyone a power the policy did not.

const org: Profile = testProfile({
  rules: {
    money_transfer: {
      amount_field: "amount",
      witness_above: 1_000,
      deny_above: 100_000,
      contract: { rule: { any: [{ all: [{ class: "human" }, { class: "fraud" }] }, { class: "breakglass" }] }, veto: ["compliance"] }
    }
  }
})
const transferRule = org.rules!["money_transfer"]!

let nats: TestNats
let kernel: InProcessKernel
let conns: ReadonlyArray<NatsConnection> = []
let root: WitnessClient
let ops: WitnessClient
let opsWitness: WitnessClient
let rootWitness: WitnessClient
let bank: DemoBank

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [org])
  conns = await Promise.all((["kernel", "witness", "bank"] as const).map((r) => connectAs(nats.servers, r)))
  // policy.apply is an admin subject: only the kernel role's login may publish it.
  root = clientFor(conns[0]!, "admin:root")
  ops = clientFor(conns[0]!, "admin:ops")
  rootWitness = clientFor(conns[1]!, "admin:root")
  opsWitness = clientFor(conns[1]!, "admin:ops")
  bank = new DemoBank().serve(conns[2]!)
}, 60_000)

afterAll(async () => {
  await kernel?.stop()
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
})

type Applied = { status: number; held_id?: string; policy_epoch?: number; duplicate?: boolean; witness_request?: { contract: { summary?: string } }; error?: { code?: string } }
const apply = (as: WitnessClient, p: Profile) => as.applyPolicy(p as never) as Promise<Applied>
const policyNow = () => kernel.policy()
const epoch = async () => (await policyNow()).epoch
const inForce = async () => (await policyNow()).profiles.find((p) => p.name === org.name)!

describe("one admin gives nobody a power alone", () => {
  it("case 1: admin:root edits admin:ops's held policy change into one that makes agent:mallory an admin -> refused; the change is proposed again, whole", async () => {
    const small = await apply(ops, { ...org, rules: { money_transfer: { ...transferRule, witness_above: 1_500 } } })
    expect(small.status).toBe(202)
    const h = (await rootWitness.get(small.held_id!)).held!
    const evil = { ...org, admins: [...org.admins!, "agent:mallory"], grants: { ...org.grants, "agent:mallory": ["money_transfer", "bank_balance"] } }
    const edited = await rootWitness.edit(small.held_id!, "admin", { profile: evil })
    expect(edited).toMatchObject({ status: 422, reason: "a kernel_policy_apply call is not edited: propose the change again, whole" })
    expect((await rootWitness.get(small.held_id!)).held).toMatchObject({ generation: h.generation, lifecycle: "open" })
    expect((await inForce()).admins).not.toContain("agent:mallory")
  })

  it("case 3: adding a veto class (it gives oncall:olga a veto) is a widening: held for the second admin, not applied", async () => {
    const before = await epoch()
    const r = await apply(root, { ...org, rules: { money_transfer: { ...transferRule, contract: { ...transferRule.contract!, veto: ["compliance", "oncall"] } } } })
    expect(r.status).toBe(202)
    expect(r.witness_request!.contract.summary).toContain("oncall:olga: vetoes money_transfer calls")
    expect(await epoch()).toBe(before)
  })

  it("case 5: removing compliance:zoe, the only veto holder, is a widening: held, and the veto stays", async () => {
    const { "compliance:zoe": _zoe, ...rest } = org.principals!
    const before = await epoch()
    const r = await apply(root, { ...org, principals: rest })
    expect(r.status).toBe(202)
    expect(r.witness_request!.contract.summary).toContain("compliance:zoe no longer vetoes money_transfer calls")
    expect(await epoch()).toBe(before)
    expect(Object.keys((await inForce()).principals!)).toContain("compliance:zoe")
  })

  it("case 6: a presentation template with fixed text ('Refund 9 EUR' for any transfer) is a widening: held, witnesses keep reading the call", async () => {
    const before = await epoch()
    const r = await apply(root, { ...org, presentation: { money_transfer: "Refund 9 EUR" } })
    expect(r.status).toBe(202)
    expect(r.witness_request!.contract.summary).toContain('witnesses of money_transfer are shown \\"Refund 9 EUR\\"'.replace(/\\/g, ""))
    expect(await epoch()).toBe(before)
  })

  it("case 7: an evidence term is a query a verifier runs: adding one (ROLLBACK; UPDATE ...) is a widening, held", async () => {
    const before = await epoch()
    const term = { name: "paid", kind: "sql-readback", by: { class: "fraud" }, params: { connection: "ledger", query: "ROLLBACK; UPDATE accounts SET balance = 1e9" }, expect: { row_count: 1 } }
    const r = await apply(root, { ...org, rules: { money_transfer: { ...transferRule, contract: { ...transferRule.contract!, evidence: [term] } } } })
    expect(r.status).toBe(202)
    expect(r.witness_request!.contract.summary).toContain("verifiers run sql-readback 'paid'")
    expect(await epoch()).toBe(before)
  })
})

describe("every policy change applies when its signer asks", () => {
  it("case 4: W (witnessed), then N (narrowing), then W again: the third is a change of its own, held and applied when approved", async () => {
    const loose = { ...org, rules: { money_transfer: { ...transferRule, witness_above: 3_000 } } }
    const first = await apply(root, loose)
    expect(first.status).toBe(202)
    expect((await opsWitness.decide(first.held_id!, "admin")).disposition).toBe("accepted")
    await eventually(async () => (await inForce()).rules!["money_transfer"]!.witness_above === 3_000)
    const narrowed = await apply(root, org)
    expect(narrowed).toMatchObject({ status: 200 })
    expect((await inForce()).rules!["money_transfer"]!.witness_above).toBe(1_000)
    // The same profile as the first change, signed again: a new held call, never a duplicate.
    const again = await apply(root, loose)
    expect(again.status).toBe(202)
    expect(again.held_id).not.toBe(first.held_id)
    expect((await opsWitness.decide(again.held_id!, "admin")).disposition).toBe("accepted")
    await eventually(async () => (await inForce()).rules!["money_transfer"]!.witness_above === 3_000)
    // The same signed request sent twice is one change.
    const envelope = root.sign({ op: "policy.apply", profile: org, nonce: randomBytes(12).toString("hex"), expires_at: new Date(Date.now() + 60_000).toISOString() })
    const once = await root.request<Applied>(Subjects.policyApply, envelope)
    const twice = await root.request<Applied>(Subjects.policyApply, envelope)
    expect(once).toMatchObject({ status: 200 })
    expect(twice).toMatchObject({ status: 200, duplicate: true, policy_epoch: once.policy_epoch })
    expect(bank.effects).toBe(0)
  })
})
