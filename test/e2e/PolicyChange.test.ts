import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventsOf, eventually } from "../support/Stream.js"
import { failedChecks, replayAs } from "../audit/support.js"

// Witnessed policy change over NATS: a narrowing applies at once; a widening is a held call of
// the kernel's `kernel_policy_apply` tool that another admin must approve, executed once.
let nats: TestNats
let kernel: InProcessKernel
let conns: Array<NatsConnection> = []
let root: WitnessClient
let ops: WitnessClient
let alice: WitnessClient
let bank: DemoBank
const profile = testProfile()
const rule = profile.rules!["money_transfer"]!
const withThreshold = (witness_above: number): Profile => ({ ...profile, rules: { money_transfer: { ...rule, witness_above } } })

let n = 0
const transfer = (amount: number) => alice.propose({ session_id: "s-policy", turn_id: "t1", call_id: `pc${++n}`, tool: "money_transfer", args: { from: `acct-pc${n}`, to: "shop", amount } }) as Promise<{ status: number; held_id: string }>
const heldOf = async (id: string) => (await root.get(id)).held!

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [profile])
  conns = await Promise.all((["kernel", "witness", "agent", "bank"] as const).map((r) => connectAs(nats.servers, r)))
  root = clientFor(conns[0]!, "admin:root")
  ops = clientFor(conns[1]!, "admin:ops")
  alice = clientFor(conns[2]!, "agent:alice")
  bank = new DemoBank().serve(conns[3]!)
})

afterAll(async () => {
  await kernel?.stop()
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
})

describe("witnessed policy change", () => {
  it("a narrowing applies at once and bumps the epoch; re-applying it changes nothing", async () => {
    const r = await root.applyPolicy(withThreshold(800) as never)
    expect(r).toMatchObject({ status: 200, policy_epoch: 2 })
    expect(await transfer(900)).toMatchObject({ status: 202 })
  })

  it("a widening sent to policy.apply is held (202) as kernel_policy_apply, waits for another admin (not the proposer), then runs once and takes effect", async () => {
    const held = (await root.applyPolicy(withThreshold(5_000) as never)) as unknown as { status: number; held_id: string; witness_request: { contract: { rule: unknown; summary: string }; presentation: { tool: string } } }
    expect(held.status).toBe(202)
    expect(held.witness_request.contract.rule).toEqual({ principal: "admin:ops" })
    expect(held.witness_request.contract.summary).toContain("rules.money_transfer.witness_above")
    expect(held.witness_request.presentation.tool).toBe("kernel_policy_apply")
    // Signed again, the same profile is a change of its own: another held call.
    const again = (await root.applyPolicy(withThreshold(5_000) as never)) as unknown as { status: number; held_id: string }
    expect(again.status).toBe(202)
    expect(again.held_id).not.toBe(held.held_id)
    // Its proposer withdraws it; it never runs.
    await root.cancel(again.held_id, "sent twice")
    expect((await heldOf(again.held_id))["lifecycle"]).toBe("cancelled")
    // The proposer cannot witness its own change; the widened rule is not in effect yet.
    const own = await clientFor(conns[1]!, "admin:root").decide(held.held_id, "admin")
    expect(own.disposition).not.toBe("accepted")
    expect(await transfer(3_000)).toMatchObject({ status: 202 })
    expect((await heldOf(held.held_id))["lifecycle"]).toBe("open")

    expect((await ops.decide(held.held_id, "admin")).disposition).toBe("accepted")
    const done = await eventually(async () => {
      const h = await heldOf(held.held_id)
      return h["lifecycle"] === "completed" && h
    })
    expect(done["result"]).toEqual({ policy_epoch: 3, profile: "test-org" })
    const types = (await eventsOf(conns[0]!, held.held_id)).map((e) => e.type)
    expect(types.filter((t) => t === "effect.dispatched")).toHaveLength(1)
    expect(types.filter((t) => t === "effect.recorded")).toHaveLength(1)
    const before = bank.effects
    expect(await transfer(3_000)).toMatchObject({ status: 200 })
    expect(bank.effects - before).toBe(1)
    // It is now the policy in force: applying it again is no widening.
    expect(await root.applyPolicy(withThreshold(5_000) as never)).toMatchObject({ status: 200, policy_epoch: 4 })
  })

  it("only an admin may propose a policy change; a narrowing proposed as kernel_policy_apply runs at once", async () => {
    const bad = await alice.proposePolicy(withThreshold(100_000) as never)
    expect(bad).toMatchObject({ status: 403 })
    expect(JSON.stringify(bad)).toContain("is not a policy admin")
    const narrowed = await root.proposePolicy(withThreshold(4_000) as never)
    expect(narrowed).toMatchObject({ status: 200, result: { policy_epoch: 5 } })
  })

  it("a user layer that grants a tool the organization does not is refused with both layers named", async () => {
    const user: Profile = { name: "carol-prefs", layer: "user", grants: { "agent:alice": ["wire_transfer"] } }
    const r = await root.applyPolicy(user as never)
    expect(r).toMatchObject({ status: 400, error: { code: "invalid_request" } })
    expect(r.error!.message).toContain("user layer 'carol-prefs'")
    expect(r.error!.message).toContain("organization 'test-org'")
    expect(r.error!.message).toContain("wire_transfer")
  })

  it("the auditor's replay verifies the policy change's signed request and re-derives its decisions", async () => {
    const r = await replayAs(nats.servers, "auditor")
    expect(failedChecks(r), JSON.stringify(r.checks.filter((c) => c.status === "failed"), null, 1)).toEqual([])
  })
})
