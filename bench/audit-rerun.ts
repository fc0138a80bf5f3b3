// Audit replay with plugin re-runs, by history size: an in-process kernel under the bench profile
// (three plugin decisions on each ALLOW call's way in and one admission) writes N calls, then
// `replay` re-derives every call and re-runs every recorded plugin decision from the pinned wasm.
// Sizes: WK_BENCH_RERUN_CALLS (default 1000,10000). Reports calls/s with re-runs, without them,
// and the largest heap seen during the replay (memory flat in the history's size or not).
import { ManagedRuntime } from "effect"
import { DemoBank } from "../runtime/executor/DemoBank.js"
import { replay } from "../runtime/audit/Replay.js"
import type { LedgerReader } from "../runtime/ledger/LedgerReader.js"
import { layerLedgerReaderAt } from "../runtime/ledger/NatsLedgerReader.js"
import type { LedgerError } from "../runtime/schema/LedgerError.js"
import { startTestNats, Roles } from "../test/support/TestNats.js"
import { clientFor, connectAs } from "../test/support/Principals.js"
import { startKernel } from "../test/support/InProcessKernel.js"
import { benchProfile } from "./BenchProfile.js"
import { row, type Row } from "./Table.js"

const Sizes = (process.env["WK_BENCH_RERUN_CALLS"] ?? "1000,10000").split(",").map(Number).filter((n) => n > 0)

/** Writes `calls` ALLOW calls through a kernel under the bench profile, 64 at a time. */
const populate = async (servers: string, calls: number) => {
  const kernel = await startKernel(servers, [benchProfile()])
  const [tool, agent] = await Promise.all([connectAs(servers, "bank"), connectAs(servers, "agent")])
  new DemoBank({ openingBalance: 1e12 }).serve(tool)
  const alice = clientFor(agent, "agent:alice")
  let n = 0
  let left = calls
  await Promise.all(Array.from({ length: 64 }, async () => {
    while (left-- > 0) {
      const r = await alice.propose({ session_id: "bench-rerun", turn_id: "t", call_id: `c${++n}`, tool: "money_transfer", args: { from: `a${n}`, to: "b", amount: 10 } })
      if (r.status !== 200) throw new Error(`populate: ${JSON.stringify(r)}`)
    }
  }))
  await kernel.stop()
  await Promise.all([tool.close(), agent.close()])
}

/** One replay's duration, its CPU (all threads) and the largest heap and RSS sampled while it ran. */
const timed = async (runtime: ManagedRuntime.ManagedRuntime<LedgerReader, LedgerError>, rerun: boolean) => {
  let peak = process.memoryUsage().heapUsed
  let peakRss = process.memoryUsage().rss
  const sampler = setInterval(() => {
    const m = process.memoryUsage()
    peak = Math.max(peak, m.heapUsed)
    peakRss = Math.max(peakRss, m.rss)
  }, 50)
  const c0 = process.cpuUsage()
  const t0 = performance.now()
  const report = await runtime.runPromise(replay({ factsBucket: null, sessionsStream: null, rerunPlugins: rerun }))
  const ms = performance.now() - t0
  const cpu = process.cpuUsage(c0)
  clearInterval(sampler)
  const rerunCheck = report.checks.find((c) => c.name === "plugin-rerun")!
  if (!report.ok) throw new Error(`replay failed: ${report.checks.filter((c) => c.status === "failed").map((c) => c.name).join(", ")}`)
  return { ms, cpuMs: (cpu.user + cpu.system) / 1000, calls: report.held_calls, decisions: rerunCheck.checked, peakMb: peak / 1024 / 1024, peakRssMb: peakRss / 1024 / 1024 }
}

export const runAuditRerunBench = async (): Promise<Array<Row>> => {
  const rows: Array<Row> = []
  /** Per size: milliseconds per call with re-runs (wall and CPU), and the peak RSS, for the growth rows. */
  const measured: Array<{ size: number; msPerCall: number; cpuPerCall: number; rssMb: number }> = []
  for (const size of Sizes) {
    const nats = await startTestNats()
    try {
      const p0 = performance.now()
      await populate(nats.servers, size)
      console.log(`audit rerun bench: ${size} calls written in ${((performance.now() - p0) / 1000).toFixed(1)} s`)
      const runtime = ManagedRuntime.make(layerLedgerReaderAt({ servers: nats.servers, ...Roles.auditor, name: "bench-rerun" }))
      try {
        await timed(runtime, true) // warm-up: workers, compiled plugins
        const withRerun = await timed(runtime, true)
        const without = await timed(runtime, false)
        console.log(`audit rerun bench: ${withRerun.calls} calls, ${withRerun.decisions} plugin decisions re-run in ${(withRerun.ms / 1000).toFixed(2)} s (peak heap ${withRerun.peakMb.toFixed(0)} MB); without re-runs ${(without.ms / 1000).toFixed(2)} s`)
        rows.push(row(`audit replay with plugin re-runs, ${size} calls`, (withRerun.calls / withRerun.ms) * 1000, 1000, "calls/s", ">= 1,000 calls/s"))
        rows.push(row(`audit replay without re-runs, ${size} calls`, (without.calls / without.ms) * 1000, 1000, "calls/s"))
        rows.push(row(`audit replay peak heap, ${size} calls`, withRerun.peakMb, 1, "MB"))
        rows.push(row(`audit replay peak RSS, ${size} calls`, withRerun.peakRssMb, 1, "MB"))
        rows.push(row(`audit replay CPU per call with re-runs (all threads), ${size} calls`, withRerun.cpuMs / withRerun.calls, 1, "ms/call", "<= 2 ms/call on 2 cores"))
        measured.push({ size, msPerCall: withRerun.ms / withRerun.calls, cpuPerCall: withRerun.cpuMs / withRerun.calls, rssMb: withRerun.peakRssMb })
      } finally {
        await runtime.dispose()
      }
    } finally {
      await nats.dispose()
    }
  }
  // Growth against the smallest size: time per call (1 = linear) and peak RSS (1 = flat).
  const base = measured[0]
  for (const m of measured.slice(1)) {
    if (base === undefined) break
    rows.push(row(`audit replay growth ${base.size} -> ${m.size} calls: wall per call`, m.msPerCall, base.msPerCall, "ms/call", "ratio ~1 (linear)"))
    rows.push(row(`audit replay growth ${base.size} -> ${m.size} calls: CPU per call`, m.cpuPerCall, base.cpuPerCall, "ms/call", "ratio ~1 (linear)"))
    rows.push(row(`audit replay growth ${base.size} -> ${m.size} calls: peak RSS`, m.rssMb, base.rssMb, "MB", "ratio ~1 (flat)"))
  }
  if (!Sizes.includes(100_000)) console.log("audit rerun bench: 100,000 calls not measured (WK_BENCH_RERUN_CALLS=1000,10000,100000 runs it; writing the history alone takes minutes)")
  return rows
}

// Run on its own: `npx tsx bench/audit-rerun.ts` (or `WK_BENCH_ONLY=rerun npm run bench`).
if (import.meta.url === `file://${process.argv[1]}`) {
  const { printTable } = await import("./Table.js")
  printTable(await runAuditRerunBench())
  process.exit(0)
}
