// Bytes allocated per sequential ALLOW call: the kernel runs in this process (as in
// bench/effect-ops.ts) and V8's sampling heap profiler, told to keep the samples of objects the
// young and old generation collections freed, estimates every byte allocated between the first
// and the last call. The agent's client (signing, the request) runs in the same process and is
// counted too; the DemoBank tool as well.
import { Effect, Fiber, ManagedRuntime } from "effect"
import { Session } from "node:inspector/promises"
import { join } from "node:path"
import { layerKernel, publishLocalPlugins, runKernel } from "../runtime/Kernel.js"
import { repoRoot } from "../runtime/cli/Paths.js"
import { DemoBank } from "../runtime/executor/DemoBank.js"
import { startTestNats, Roles } from "../test/support/TestNats.js"
import { clientFor, connectAs } from "../test/support/Principals.js"
import { benchProfile } from "./BenchProfile.js"
import { row, type Row } from "./Table.js"

const Calls = process.env["WK_BENCH_QUICK"] === "1" ? 50 : 300

interface SamplingProfile {
  readonly samples: ReadonlyArray<{ readonly size: number }>
}

export const runAllowAllocationBench = async (): Promise<Array<Row>> => {
  const nats = await startTestNats()
  const bankConn = await connectAs(nats.servers, "bank")
  const bank = new DemoBank({ openingBalance: 1e12 }).serve(bankConn)
  const agent = await connectAs(nats.servers, "agent")
  const runtime = ManagedRuntime.make(layerKernel({ nats: { servers: nats.servers, ...Roles.kernel }, profiles: [benchProfile()] }))
  const session = new Session()
  session.connect()
  try {
    await runtime.runPromise(publishLocalPlugins(join(repoRoot, "plugins")))
    const fiber = await runtime.runPromise(Effect.forkDaemon(Effect.scoped(Effect.zipRight(runKernel, Effect.never))))
    await runtime.runPromise(Effect.sleep(100))
    const alice = clientFor(agent, "agent:alice")
    let seq = 0
    const allow = async () => {
      const r = await alice.propose({ session_id: "alloc", turn_id: "t", call_id: `a${++seq}`, tool: "money_transfer", args: { from: `a${seq}`, to: "b", amount: 10 } })
      if (r.status !== 200) throw new Error(`allow-allocation ALLOW got ${JSON.stringify(r)}`)
    }
    for (let i = 0; i < 20; i++) await allow() // warm-up, excluded
    await session.post("HeapProfiler.startSampling", { samplingInterval: 512, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true } as never)
    for (let i = 0; i < Calls; i++) await allow()
    const { profile } = (await session.post("HeapProfiler.stopSampling")) as unknown as { profile: SamplingProfile }
    const bytes = profile.samples.reduce((n, s) => n + s.size, 0)
    await runtime.runPromise(Fiber.interrupt(fiber))
    return [row("bytes allocated per ALLOW call (kernel, client and tool in one process, sequential)", bytes / Calls / 1024, 0, "KB")]
  } finally {
    session.disconnect()
    await runtime.dispose()
    bank.stop()
    await Promise.all([agent, bankConn].map((c) => c.close()))
    await nats.dispose()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { printTable } = await import("./Table.js")
  printTable(await runAllowAllocationBench())
}
