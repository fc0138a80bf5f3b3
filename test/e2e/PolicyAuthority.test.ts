import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { explain } from "../../runtime/cli/ProfileCommands.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { pinOf } from "../support/Pins.js"
import { eventually } from "../support/Stream.js"
import { failedChecks, replayAs } from "../audit/support.js"

// Authority never widens through policy: as an attacker holding one admin key (or writing a
// project layer) would try it, over NATS against a real kernel.

interface Running {
  readonly nats: TestNats
  readonly kernel: InProcessKernel
  readonly conns: ReadonlyArray<NatsConnection>
  readonly root: WitnessClient
  readonly ops: WitnessClient
  readonly alice: WitnessClient
  readonly bank: DemoBank
}

const start = async (profiles: ReadonlyArray<Profile>): Promise<Running> => {
  const nats = await startTestNats()
  const kernel = await startKernel(nats.servers, profiles)
  // The bank serves under its own NATS user: the shared `tool` login may serve no tool at all.
  const conns = await Promise.all((["kernel", "witness", "agent", "bank"] as const).map((r) => connectAs(nats.servers, r)))
  return { nats, kernel, conns, root: clientFor(conns[0]!, "admin:root"), ops: clientFor(conns[1]!, "admin:ops"), alice: clientFor(conns[2]!, "agent:alice"), bank: new DemoBank().serve(conns[3]!) }
}

const stop = async (r: Running | undefined) => {
  await r?.kernel.stop()
  await Promise.all((r?.conns ?? []).map((c) => c.close()))
  await r?.nats.dispose()
}

let n = 0
const transfer = (r: Running, amount: number) =>
  r.alice.propose({ session_id: "s-authority", turn_id: "t1", call_id: `pa${++n}`, tool: "money_transfer", args: { from: `acct-pa${n}`, to: "shop", amount } }) as Promise<{
    status: number
    held_id: string
    outcome?: string
    reasons?: ReadonlyArray<{ by: string; reason: string }>
    witness_request?: { contract: { rule: unknown; veto?: ReadonlyArray<string> } }
  }>

const spendLimit = (witness_above: number) =>
  pinOf("spend-limit", { stages: ["adjudicate"], precedence: 10, config: { rules: { money_transfer: { amount_field: "amount", witness_above, deny_above: 100_000 } } } })

describe("an organization that pins spend-limit", () => {
  const org = testProfile({ rules: {}, plugins: [spendLimit(1000)] })
  let r: Running
  beforeAll(async () => {
    r = await start([org])
  })
  afterAll(() => stop(r))

  it("a project rule deny_above 50000 is enforced next to the organization's plugin, as `wk profile explain` reports", async () => {
    const project: Profile = { name: "payments", layer: "project", rules: { money_transfer: { amount_field: "amount", deny_above: 50_000 } } }
    expect(await r.root.applyPolicy(project as never)).toMatchObject({ status: 200 })
    const over = await transfer(r, 60_000)
    expect(over).toMatchObject({ status: 403, outcome: "denied" })
    expect(over.reasons).toEqual([{ by: "rule:money_transfer:narrowing", reason: "amount 60000 is over the hard cap 50000" }])
    // Under the project's cap the organization's plugin still holds it.
    expect(await transfer(r, 20_000)).toMatchObject({ status: 202 })
    const e = explain([org, project], "agent:alice", "money_transfer")
    expect(e.rule).toMatchObject({ deny_above: 50_000 })
    expect(e.rule_set_by).toEqual(["project 'payments'"])
    expect(e.note).not.toContain("not consulted")
    expect(e.note).toContain("every layer")
  })

  it("a config-only change to a pinned plugin (witness_above 1e15) is a widening: it waits for a second admin and releases no held call", async () => {
    const before = r.bank.effects
    const held = await transfer(r, 5_000)
    expect(held.status).toBe(202)
    const change = (await r.root.applyPolicy(testProfile({ rules: {}, plugins: [spendLimit(1e15)] }) as never)) as unknown as {
      status: number
      held_id: string
      witness_request: { contract: { rule: unknown; summary: string } }
    }
    expect(change.status).toBe(202)
    expect(change.witness_request.contract.rule).toEqual({ principal: "admin:ops" })
    expect(change.witness_request.contract.summary).toContain("plugins.spend-limit")
    expect(change.witness_request.contract.summary).toContain("config")
    // No epoch was applied, so nothing was re-evaluated: the held transfer waits, nothing ran.
    expect((await r.root.get(held.held_id)).held!["lifecycle"]).toBe("open")
    expect(await transfer(r, 5_000)).toMatchObject({ status: 202 })
    expect(r.bank.effects).toBe(before)

  })

  it("with the second admin's approval the config-only change takes effect, and only then is the call released", async () => {
    const before = r.bank.effects
    const held = await transfer(r, 5_000)
    const change = (await r.root.applyPolicy(testProfile({ rules: {}, plugins: [spendLimit(1e15)] }) as never)) as unknown as { held_id: string }
    expect((await r.ops.decide(change.held_id, "admin")).disposition).toBe("accepted")
    await eventually(async () => (await r.root.get(held.held_id)).held!["lifecycle"] === "completed")
    expect(r.bank.effects).toBeGreaterThan(before)
  })

  it("the auditor's replay finds nothing wrong in this history", async () => {
    const report = await replayAs(r.nats.servers, "auditor")
    expect(failedChecks(report), JSON.stringify(report.checks.filter((c) => c.status === "failed"), null, 1)).toEqual([])
  })
})

describe("an organization whose built-in rules hold transfers over 1,000", () => {
  let r: Running
  beforeAll(async () => {
    r = await start([testProfile()])
  })
  afterAll(() => stop(r))

  it("a project layer pinning spend-limit with config {} does not allow a 90,000 transfer the organization holds", async () => {
    expect(await transfer(r, 90_000)).toMatchObject({ status: 202 })
    const project: Profile = { name: "payments", layer: "project", plugins: [pinOf("spend-limit", { stages: ["adjudicate"], config: {} })] }
    expect(await r.root.applyPolicy(project as never)).toMatchObject({ status: 200 })
    const after = await transfer(r, 90_000)
    expect(after).toMatchObject({ status: 202 })
    // The organization's contract, not one the project's plugin named.
    expect(after.witness_request!.contract).toMatchObject({ rule: { class: "human" }, veto: ["compliance"] })
    expect(r.bank.effects).toBe(0)
  })
})
