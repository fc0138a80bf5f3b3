// Audit replay rate (re-fold, every check, signature verification) against the raw read rate
// of the same stream with an ordered consumer, measured in the same run on the same server.
import { jetstream, DeliverPolicy } from "@nats-io/jetstream"
import type { NatsConnection } from "@nats-io/transport-node"
import { ManagedRuntime } from "effect"
import { DemoBank } from "../runtime/executor/DemoBank.js"
import { replay } from "../runtime/audit/Replay.js"
import { layerLedgerReaderAt } from "../runtime/ledger/NatsLedgerReader.js"
import { Streams } from "../runtime/schema/Subjects.js"
import { startTestNats } from "../test/support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../test/support/Principals.js"
import { startKernel } from "../test/support/InProcessKernel.js"
import { Roles } from "../test/support/TestNats.js"
import { availableParallelism, loadavg } from "node:os"
import { readFileSync } from "node:fs"
import { median, printTable, row, type Row } from "./Table.js"

const Runs = Number(process.env["WK_BENCH_RUNS"] ?? 5)
/** ALLOW calls (6 events each, one signed envelope) and witnessed calls (about 10 events, two envelopes). */
const AllowCalls = Number(process.env["WK_BENCH_ALLOW"] ?? 4000)
const HeldCalls = Number(process.env["WK_BENCH_HELD"] ?? 600)

/** CPU time of this process's main thread (ms): Linux schedstat; elsewhere the whole process. */
const mainThreadMs = (): number => {
  try {
    return Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, "utf8").split(" ")[0]) / 1e6
  } catch {
    const u = process.cpuUsage()
    return (u.user + u.system) / 1000
  }
}
const processMs = (): number => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}

/** CPU (main thread, whole process) spent per message by `f`, in microseconds. */
const cpuPerMessage = async <A extends { readonly count: number }>(f: () => Promise<A>): Promise<A & { readonly mainUs: number; readonly processUs: number }> => {
  const m0 = mainThreadMs()
  const p0 = processMs()
  const a = await f()
  return { ...a, mainUs: ((mainThreadMs() - m0) * 1000) / a.count, processUs: ((processMs() - p0) * 1000) / a.count }
}

/** Messages per second of a bare ordered-consumer read of the whole stream (no decoding). */
const rawRead = async (nc: NatsConnection): Promise<{ rate: number; count: number }> => {
  const t0 = performance.now()
  const consumer = await jetstream(nc).consumers.get(Streams.events, { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: 1 })
  const messages = await consumer.consume({ max_messages: 4096 })
  let count = 0
  for await (const m of messages) {
    count++
    if (m.info.pending === 0) break
  }
  await messages.close()
  await consumer.delete().catch(() => false)
  return { rate: count / ((performance.now() - t0) / 1000), count }
}

/** Drives a realistic log through an in-process kernel. */
const populate = async (servers: string) => {
  const [tool, agent, witness] = await Promise.all([connectAs(servers, "bank"), connectAs(servers, "agent"), connectAs(servers, "witness")])
  new DemoBank({ openingBalance: 1e12 }).serve(tool)
  const alice = clientFor(agent, "agent:alice")
  const carol = clientFor(witness, "user:carol")
  let n = 0
  const call = (amount: number) => ({ session_id: "bench-audit", turn_id: "t", call_id: `c${++n}`, tool: "money_transfer", args: { from: `a${n}`, to: "b", amount } })
  const pool = async (count: number, f: () => Promise<void>, width = 64) => {
    let left = count
    await Promise.all(Array.from({ length: width }, async () => { while (left-- > 0) await f() }))
  }
  await pool(AllowCalls, async () => {
    const r = await alice.propose(call(10))
    if (r.status !== 200) throw new Error(`populate: ${JSON.stringify(r)}`)
  })
  await pool(HeldCalls, async () => {
    const h = (await alice.propose(call(5000))) as { held_id: string; generation: number; call_digest: string; witness_request: { contract_digest: string } }
    const a = await carol.attest({ held_id: h.held_id, generation: h.generation, call_digest: h.call_digest, contract_digest: h.witness_request.contract_digest, class: "human", decision: "approve" })
    if (a.disposition !== "accepted") throw new Error(`populate: ${JSON.stringify(a)}`)
  })
  return [tool, agent, witness]
}

/** Replay and raw read rates of one populated stream; rows for bench/Table.ts. */
export const runAuditReplayBench = async (): Promise<Array<Row>> => {
  const nats = await startTestNats()
  const kernel = await startKernel(nats.servers, [testProfile()])
  const conns = await populate(nats.servers)
  // Let the last deliveries and projections land, then stop the kernel: a quiet stream.
  await new Promise((r) => setTimeout(r, 3000))
  await kernel.stop()
  const auditor = await connectAs(nats.servers, "auditor")
  // Both sides read over an open auditor connection: the replay's own connect is not measured.
  const runtime = ManagedRuntime.make(layerLedgerReaderAt({ servers: nats.servers, ...Roles.auditor, name: "bench-auditor" }))
  try {
    const raw: Array<number> = []
    const full: Array<number> = []
    const noProjection: Array<number> = []
    const mainThread: Array<number> = []
    const rawCpu: Array<{ mainUs: number; processUs: number }> = []
    const replayCpu: Array<{ mainUs: number; processUs: number }> = []
    let events = 0
    let violations = 0
    const replayRate = async (factsBucket: string | null, verifyWorkers?: number) => {
      const t0 = performance.now()
      const r = await runtime.runPromise(replay({ factsBucket, ...(verifyWorkers !== undefined ? { verifyWorkers } : {}) }))
      violations += r.violations
      events = r.events
      return r.events / ((performance.now() - t0) / 1000)
    }
    await rawRead(auditor) // warm-up
    await replayRate(null)
    for (let i = 0; i < Runs; i++) {
      const r = await cpuPerMessage(() => rawRead(auditor))
      raw.push(r.rate)
      rawCpu.push(r)
      const a = await cpuPerMessage(async () => {
        const rate = await replayRate(null)
        return { rate, count: events }
      })
      noProjection.push(a.rate)
      replayCpu.push(a)
      mainThread.push(await replayRate(null, 0))
      full.push(await replayRate("wk_facts"))
    }
    if (violations > 0) throw new Error(`the benchmark log has ${violations} violations: the bench measures a broken replay`)
    const rawRate = median(raw)
    return [
      row(`raw ordered-consumer read (${events} messages)`, rawRate, rawRate, "events/s"),
      row("audit replay: decode, re-fold, every check, signatures", median(noProjection), rawRate, "events/s", ">= 0.5x raw"),
      row("audit replay, signatures on the main thread", median(mainThread), rawRate, "events/s"),
      row("audit replay, plus the KV projection comparison", median(full), rawRate, "events/s"),
      // What the replay's rate is made of on a shared box: CPU per event next to the raw read's.
      row("audit replay main-thread CPU per event (vs raw read)", median(replayCpu.map((c) => c.mainUs)), median(rawCpu.map((c) => c.mainUs)), "us/event"),
      row("audit replay process CPU per event, all threads (vs raw read)", median(replayCpu.map((c) => c.processUs)), median(rawCpu.map((c) => c.processUs)), "us/event")
    ]
  } finally {
    await runtime.dispose()
    await Promise.all([...conns, auditor].map((c) => c.close()))
    await nats.dispose()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  runAuditReplayBench().then(
    (rows) => {
      printTable(rows)
      console.log(`\naudit replay = ${rows[1]!.ratio}x the raw ordered-consumer read rate (${rows[2]!.ratio}x verifying on the main thread, ${rows[3]!.ratio}x with the projection comparison); ${availableParallelism()} cores, load ${loadavg()[0]!.toFixed(1)}; median of ${Runs} interleaved runs`)
      process.exit(0)
    },
    (e) => {
      console.error(e)
      process.exit(1)
    }
  )
}
