import { readFileSync } from "node:fs"
import { jetstreamManager } from "@nats-io/jetstream"
import { startTestNats } from "../test/support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../test/support/Principals.js"
import { profileDir, startKernelProcess } from "../test/support/KernelProcess.js"
import { Streams } from "../runtime/schema/Subjects.js"
import { ControllerConsumer } from "../runtime/ledger/Provision.js"
import { printTable, progress, row, type Row } from "./Table.js"
import { StatusSubject } from "../runtime/protocol/Status.js"

const rssMb = (pid: number) => {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
  return m ? Number(m[1]) / 1024 : NaN
}

/** Asks the kernel to collect garbage and report its heap (it runs with --expose-gc here). */
const heapMb = async (nc: Awaited<ReturnType<typeof connectAs>>) => {
  const r = await nc.request(StatusSubject, "gc", { timeout: 10_000 })
  return (r.json() as { memory: { heap_used: number } }).memory.heap_used / 1024 / 1024
}

/**
 * Resident memory of one kernel process with 10 parked held calls, then with N (default
 * 100,000): parked calls live in JetStream only, so the difference should stay small.
 */
export const runParkedMemoryBench = async (total = Number(process.env["WK_BENCH_PARKED"] ?? 100_000)): Promise<Array<Row>> => {
  const nats = await startTestNats()
  const profiles = profileDir([testProfile()])
  let kernel = await startKernelProcess(nats.servers, profiles, {}, ["--expose-gc"])
  const nc = await connectAs(nats.servers, "agent")
  const kc = await connectAs(nats.servers, "kernel")
  const alice = clientFor(nc, "agent:alice")
  const jsm = await jetstreamManager(kc)
  let proposed = 0
  const park = async (count: number) => {
    const report = progress(`parking held calls`)
    const target = proposed + count
    let parked = 0
    const worker = async () => {
      while (proposed < target) {
        const i = proposed++
        const r = await alice.propose({ session_id: "bench-parked", turn_id: "t", call_id: `p${i}`, tool: "money_transfer", args: { from: `a${i}`, to: "b", amount: 5000 } })
        if (r.status !== 202) throw new Error(`expected 202, got ${JSON.stringify(r)}`)
        report(++parked, count)
      }
    }
    await Promise.all(Array.from({ length: 64 }, worker))
  }
  const settle = async () => {
    // Wait until the controller has taken every wake (nothing pending delivery), then a little more.
    for (;;) {
      const info = await jsm.consumers.info(Streams.wakes, ControllerConsumer)
      if (info.num_pending === 0) break
      await new Promise((r) => setTimeout(r, 500))
    }
    await new Promise((r) => setTimeout(r, 3000))
  }
  try {
    await park(10)
    await settle()
    const smallHeap = await heapMb(kc)
    const small = rssMb(kernel.pid)
    await park(total - 10)
    await settle()
    const largeHeap = await heapMb(kc)
    const afterLoad = rssMb(kernel.pid)
    // A freshly started kernel with every call still parked: what holding them costs, without
    // the allocator high-water mark the parking load itself left behind.
    await kernel.kill()
    kernel = await startKernelProcess(nats.servers, profiles, {}, ["--expose-gc"])
    await settle()
    await heapMb(kc)
    const fresh = rssMb(kernel.pid)
    return [
      row(`kernel RSS, fresh start with ${total} parked held calls vs 10`, fresh, small, "MB", `<= +64 MB (delta ${Math.round(fresh - small)} MB)`),
      row(`kernel live heap after GC, ${total} parked vs 10`, largeHeap, smallHeap, "MB", `delta ${Math.round(largeHeap - smallHeap)} MB`),
      row(`kernel RSS right after parking ${total} (allocator high-water)`, afterLoad, small, "MB")
    ]
  } finally {
    await kernel.kill()
    await nc.close()
    await kc.close()
    await nats.dispose()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  printTable(await runParkedMemoryBench())
}
