import { jetstreamManager } from "@nats-io/jetstream"
import { DemoBank } from "../runtime/executor/DemoBank.js"
import { ControllerConsumer } from "../runtime/ledger/Provision.js"
import { reevaluationOf } from "../runtime/cli/StatusCommand.js"
import type { Profile } from "../runtime/schema/Profile.js"
import { Streams } from "../runtime/schema/Subjects.js"
import { startTestNats } from "../test/support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../test/support/Principals.js"
import { profileDir, startKernelProcess } from "../test/support/KernelProcess.js"
import { median, note, printTable, progress, row, type Row } from "./Table.js"
import { loadavg } from "node:os"

/**
 * A narrowing `policy.apply` with N open held calls (default 10,000; WK_BENCH_REEVAL_N=100000 for
 * the full figure, which takes a few minutes to park on a 2-core machine), against one kernel
 * process: the admin's reply time (next to the same apply with no open call), the background
 * re-evaluation's rate (next to the rate the calls were proposed at), and the ALLOW p50 while it
 * runs (next to the idle p50, target within 2x).
 */
export const runPolicyReevalBench = async (total = Number(process.env["WK_BENCH_REEVAL_N"] ?? 10_000)): Promise<Array<Row>> => {
  const nats = await startTestNats()
  const base = testProfile()
  const rule = base.rules!["money_transfer"]!
  const narrowed = (deny_above: number): Profile => ({ ...base, rules: { money_transfer: { ...rule, deny_above } } })
  const kernel = await startKernelProcess(nats.servers, profileDir([base]))
  const agent = await connectAs(nats.servers, "agent")
  const kc = await connectAs(nats.servers, "kernel")
  const tool = await connectAs(nats.servers, "bank")
  const bank = new DemoBank({ openingBalance: 1e12 }).serve(tool)
  const alice = clientFor(agent, "agent:alice")
  const root = clientFor(kc, "admin:root")
  const jsm = await jetstreamManager(kc)
  let seq = 0
  const allow = async () => {
    const t = performance.now()
    const r = await alice.propose({ session_id: "bench-allow", turn_id: "t", call_id: `a${++seq}`, tool: "money_transfer", args: { from: `x${seq}`, to: "b", amount: 10 } })
    if (r.status !== 200) throw new Error(`expected 200, got ${JSON.stringify(r)}`)
    return performance.now() - t
  }
  const apply = async (deny_above: number) => {
    const t = performance.now()
    const r = await root.applyPolicy(narrowed(deny_above) as never)
    if (r.status !== 200) throw new Error(`policy.apply: ${JSON.stringify(r)}`)
    return { ms: performance.now() - t, epoch: r.policy_epoch! }
  }
  // A KV key listing can stall while the kernel writes the bucket: a read that takes too long is
  // abandoned and asked again.
  const progressOf = (epoch: number) =>
    Promise.race([reevaluationOf(kc, epoch), new Promise<undefined>((r) => setTimeout(() => r(undefined), 3000))])
  const finished = async (epoch: number) => (await progressOf(epoch))?.finished === true
  const settle = async () => {
    for (;;) {
      const info = await jsm.consumers.info(Streams.wakes, ControllerConsumer)
      if (info.num_pending === 0) break
      await new Promise((r) => setTimeout(r, 500))
    }
  }
  try {
    for (let i = 0; i < 100; i++) await allow()
    const empty = await apply(99_000)
    while (!(await finished(empty.epoch))) await new Promise((r) => setTimeout(r, 100))

    let proposed = 0
    let parked = 0
    const report = progress(`parking ${total} held calls`)
    const t0 = performance.now()
    const worker = async () => {
      while (proposed < total) {
        const i = proposed++
        const r = await alice.propose({ session_id: "bench-reeval", turn_id: "t", call_id: `p${i}`, tool: "money_transfer", args: { from: `a${i}`, to: "b", amount: 5000 } })
        if (r.status !== 202) throw new Error(`expected 202, got ${JSON.stringify(r)}`)
        report(++parked, total)
      }
    }
    await Promise.all(Array.from({ length: 64 }, worker))
    const parkRate = total / ((performance.now() - t0) / 1000)
    await settle()

    const idle: Array<number> = []
    for (let i = 0; i < 300; i++) idle.push(await allow())

    const load = loadavg()[0]!
    const applied = await apply(98_000)
    const started = performance.now()
    const during: Array<number> = []
    let last = 0
    while (!(await finished(applied.epoch))) {
      for (let i = 0; i < 20; i++) during.push(await allow())
      if (performance.now() - last > 2000) {
        last = performance.now()
        const p = await progressOf(applied.epoch)
        process.stderr.write(`re-evaluating: ${p?.done ?? 0}/${p?.total ?? "?"} (${p?.rate_per_s ?? 0}/s)\n`)
      }
    }
    const seconds = (performance.now() - started) / 1000
    const rate = total / seconds
    note(`policy re-evaluation, ${total} open held calls: wall time`, seconds, "s")
    note(`policy re-evaluation: ALLOW calls served during it`, during.length, "calls")
    note(`policy re-evaluation: 1-minute load average at the apply`, load, "")
    const p50Idle = median(idle)
    const p50During = median(during)
    return [
      row(`policy.apply reply, ${total} open held calls (floor: none open)`, applied.ms, empty.ms, "ms", "independent of open calls"),
      row(`policy re-evaluation rate, ${total} open held calls (floor: park rate)`, rate, parkRate, "calls/s"),
      row(`ALLOW p50 during re-evaluation of ${total} (floor: idle)`, p50During, p50Idle, "ms", "<= 2x")
    ]
  } finally {
    await kernel.kill()
    bank.stop()
    await Promise.all([agent.close(), kc.close(), tool.close()])
    await nats.dispose()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  printTable(await runPolicyReevalBench())
}
