import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { join } from "node:path"
import type { NatsConnection } from "@nats-io/transport-node"
import { Kvm } from "@nats-io/kv"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { Buckets } from "../../runtime/schema/Subjects.js"
import { StatusSubject } from "../../runtime/protocol/Status.js"
import { reevaluationKey, type ReevaluationProgress } from "../../runtime/schema/ReevaluationProgress.js"
import { reevaluationPaceOf } from "../../runtime/policy/ReevaluationPace.js"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { reevaluationOf } from "../../runtime/cli/StatusCommand.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { profileDir, startKernelProcess, type KernelProcess } from "../support/KernelProcess.js"
import { applyPolicyWitnessed } from "../support/PolicyChange.js"
import { eventsOf, eventually } from "../support/Stream.js"

// A policy change answers once its epoch is recorded; the open held calls are re-evaluated after,
// in the background, paced (here slowed to a few calls a second so its progress can be seen),
// resumable from a cursor, and shown in `wk status`.
const profile = testProfile()
const rule = profile.rules!["money_transfer"]!
const withRule = (r: Partial<typeof rule>): Profile => ({ ...profile, rules: { money_transfer: { ...rule, ...r } } })
const run = promisify(execFile)

interface Env {
  readonly nats: TestNats
  readonly conns: ReadonlyArray<NatsConnection>
  readonly root: WitnessClient
  readonly ops: WitnessClient
  readonly alice: WitnessClient
}

const connect = async (nats: TestNats): Promise<Env> => {
  const conns = await Promise.all((["kernel", "witness", "agent"] as const).map((r) => connectAs(nats.servers, r)))
  return { nats, conns, root: clientFor(conns[0]!, "admin:root"), ops: clientFor(conns[1]!, "admin:ops"), alice: clientFor(conns[2]!, "agent:alice") }
}

let n = 0
const park = async (env: Env, amount: number, count: number): Promise<Array<string>> => {
  const ids: Array<string> = []
  for (let i = 0; i < count; i++) {
    const r = (await env.alice.propose({ session_id: "s-reeval", turn_id: "t1", call_id: `re${++n}`, tool: "money_transfer", args: { from: `acct-re${n}`, to: "shop", amount } })) as { status: number; held_id: string }
    expect(r.status).toBe(202)
    ids.push(r.held_id)
  }
  return ids
}

const factsOf = async (env: Env, id: string) => (await env.root.get(id)).held!
/** The `policy.epoch_changed` events of `epoch` a call holds. */
const epochEvents = async (env: Env, id: string, epoch: number) =>
  (await eventsOf(env.conns[0]!, id)).filter((e) => e.type === "policy.epoch_changed" && (e as { policy_epoch: number }).policy_epoch === epoch)

const progressOf = async (nc: NatsConnection, epoch: number, shard: number): Promise<ReevaluationProgress | null> => {
  const e = await (await new Kvm(nc).open(Buckets.policy)).get(reevaluationKey(epoch, shard))
  return e === null || e.operation !== "PUT" ? null : e.json<ReevaluationProgress>()
}

const kernelStatus = async (nc: NatsConnection) => (await nc.request(StatusSubject, new Uint8Array(0), { timeout: 10_000 })).json<{ owner: string; reevaluating: { epoch: number; done: number; total: number } | null }>()

const wkStatus = async (nats: TestNats) => {
  const r = await run(process.execPath, ["--disable-warning=ExperimentalWarning", "--import", "tsx", join(repoRoot, "runtime/cli/main.ts"), "status", "--json"], {
    cwd: repoRoot,
    env: { ...process.env, NATS_URL: `nats://${nats.servers}` },
    timeout: 120_000
  })
  return JSON.parse(r.stdout) as { reevaluation: { epoch: number; done: number; total: number; finished: boolean; shards: number } | null; kernels: Array<{ reevaluating: unknown }> }
}

describe("policy re-evaluation in the background", () => {
  let env: Env
  let kernel: InProcessKernel
  let bank: DemoBank
  let bankConn: NatsConnection

  beforeAll(async () => {
    const nats = await startTestNats()
    env = await connect(nats)
    bankConn = await connectAs(nats.servers, "bank")
    bank = new DemoBank().serve(bankConn)
    // Two calls a second, one at a time: slow enough to watch the walk while it runs.
    const reevaluation = reevaluationPaceOf({ shards: 2, concurrency: 1, batch: 1, maxRatePerSec: 2, minRatePerSec: 2, pollMs: 50 })
    kernel = await startKernel(nats.servers, [profile], { config: { reevaluation } })
  }, 60_000)

  afterAll(async () => {
    await kernel?.stop()
    bank?.stop()
    await bankConn?.close()
    await Promise.all((env?.conns ?? []).map((c) => c.close()))
    await env?.nats.dispose()
  })

  it("a narrowing answers before the open calls are re-evaluated; then each is, once: denied if the new policy denies it, still held if not; status shows the progress", async () => {
    const staying = await park(env, 5_000, 6)
    const denied = await park(env, 50_000, 6)
    const all = [...staying, ...denied]

    const applied = await env.root.applyPolicy(withRule({ deny_above: 20_000 }) as never)
    expect(applied).toMatchObject({ status: 200 })
    const epoch = applied.policy_epoch!
    // The answer came before the walk: not every open call has been told of the new epoch yet.
    const toldAtReply = (await Promise.all(all.map((id) => epochEvents(env, id, epoch)))).filter((es) => es.length > 0).length
    expect(toldAtReply).toBeLessThan(all.length)

    // While the walk runs, the kernel reports the shard it is on and `wk status` the epoch's progress.
    const working = await eventually(async () => {
      const s = await kernelStatus(env.conns[0]!)
      return s.reevaluating !== null && s.reevaluating.epoch === epoch && s.reevaluating.done < all.length && s.reevaluating
    }, 60_000)
    expect(working.total).toBeGreaterThan(0)
    const midway = (await reevaluationOf(env.conns[0]!, epoch))!
    expect(midway).toMatchObject({ epoch, shards: 2, finished: false })
    expect(midway.done).toBeLessThan(all.length)

    for (const id of denied) {
      const f = await eventually(async () => {
        const x = await factsOf(env, id)
        return x["lifecycle"] !== "open" && x
      }, 120_000)
      expect(f).toMatchObject({ lifecycle: "denied", policy_epoch_checked: epoch })
    }
    for (const id of staying) {
      const f = await eventually(async () => {
        const x = await factsOf(env, id)
        return x["policy_epoch_checked"] === epoch && x
      }, 120_000)
      expect(f).toMatchObject({ lifecycle: "open", readiness: "unsatisfied", execution: "none" })
    }
    for (const id of all) expect(await epochEvents(env, id, epoch)).toHaveLength(1)

    const status = await eventually(async () => {
      const s = await wkStatus(env.nats)
      return s.reevaluation?.finished === true && s
    }, 120_000)
    expect(status.reevaluation).toMatchObject({ epoch, shards: 2, done: all.length, total: all.length })
    expect(status.kernels).toEqual([expect.objectContaining({ reevaluating: null })])
  }, 300_000)

  it("a witnessed widening re-evaluates in the background too: a held call the new policy allows is released and runs once", async () => {
    const ids = await park(env, 3_000, 3)
    const before = bank.effects
    const r = await applyPolicyWitnessed(env.root, env.ops, withRule({ deny_above: 20_000, witness_above: 4_000 }))
    expect(r.status).toBe(200)
    for (const id of ids) {
      const f = await eventually(async () => {
        const x = await factsOf(env, id)
        return x["lifecycle"] !== "open" && x
      }, 120_000)
      expect(f).toMatchObject({ lifecycle: "completed", policy_epoch_checked: r.policy_epoch })
    }
    expect(bank.effects - before).toBe(ids.length)
  }, 300_000)
})

describe("a kernel killed mid re-evaluation", () => {
  let env: Env
  const kernels: Array<KernelProcess> = []

  beforeAll(async () => {
    env = await connect(await startTestNats())
  }, 60_000)

  afterAll(async () => {
    await Promise.all(kernels.map((k) => k.kill()))
    await Promise.all((env?.conns ?? []).map((c) => c.close()))
    await env?.nats.dispose()
  })

  it("is replaced by one that resumes from the shard's cursor; every open call is re-evaluated once", async () => {
    const dir = profileDir([profile])
    // One shard, five calls a second, a short lease so the replacement takes over soon after the kill.
    const pace = { WK_REEVAL_SHARDS: "1", WK_REEVAL_CONCURRENCY: "1", WK_REEVAL_BATCH: "1", WK_REEVAL_MAX_RATE: "5", WK_REEVAL_MIN_RATE: "5", WK_REEVAL_LEASE_MS: "2000", WK_REEVAL_POLL_MS: "100" }
    const first = await startKernelProcess(env.nats.servers, dir, pace)
    kernels.push(first)
    const ids = await park(env, 5_000, 30)
    const firstOwner = (await kernelStatus(env.conns[0]!)).owner

    const applied = await env.root.applyPolicy(withRule({ deny_above: 90_000 }) as never)
    expect(applied).toMatchObject({ status: 200 })
    const epoch = applied.policy_epoch!
    await eventually(async () => ((await progressOf(env.conns[0]!, epoch, 0))?.done ?? 0) >= 5, 120_000)
    await first.kill()
    const atKill = (await progressOf(env.conns[0]!, epoch, 0))!
    expect(atKill).toMatchObject({ owner: firstOwner, finished: false })
    expect(atKill.done).toBeLessThan(ids.length)

    const second = await startKernelProcess(env.nats.servers, dir, pace)
    kernels.push(second)
    const finished = await eventually(async () => {
      const p = await progressOf(env.conns[0]!, epoch, 0)
      return p?.finished === true && p
    }, 180_000)
    expect(finished.owner).not.toBe(firstOwner)
    // It started where the killed kernel's record left off, not from zero.
    expect(finished.resumed_from).toBe(atKill.done)
    expect(finished.done).toBe(ids.length)
    for (const id of ids) {
      expect(await epochEvents(env, id, epoch)).toHaveLength(1)
      expect(await factsOf(env, id)).toMatchObject({ lifecycle: "open", policy_epoch_checked: epoch })
    }
  }, 400_000)
})
