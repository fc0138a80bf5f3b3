// Where a sequential ALLOW call's time goes inside the kernel process: its socket reads and
// writes, timed by a `--import` hook (internal/socketTimeline.mjs), split the call into the
// kernel's own work (from what it read to what it wrote next) and its waits on NATS and the tool
// (from what it wrote to what it read next). The durable floor makes the same four writes
// (commit A with its wake, the tool request, commit B, the reply), so the waits are what the
// floor also waits for, and the kernel's work is what the floor does not do.
import { mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { repoRoot } from "../runtime/cli/Paths.js"
import { DemoBank } from "../runtime/executor/DemoBank.js"
import { Subjects } from "../runtime/schema/Subjects.js"
import { clientFor, connectAs } from "../test/support/Principals.js"
import { profileDir, startKernelProcess } from "../test/support/KernelProcess.js"
import { startTestNats } from "../test/support/TestNats.js"
import { benchProfile } from "./BenchProfile.js"
import { median, note, row, type Row } from "./Table.js"

/** One socket operation of the kernel process: when (ms), read or write, and what it carried. */
export type TimelineEntry = readonly [number, "R" | "W", string]

/** The segments of one ALLOW call, in ms, in the order they happen. */
export interface CallPath {
  /** Request read -> commit A (with its wake) written: authentication, decision, plugins, the commit. */
  readonly toCommitA: number
  /** Commit A written -> its last acknowledgement read (the commit's and the wake's). */
  readonly commitAWait: number
  /** Acknowledgements read -> tool request written. */
  readonly toTool: number
  /** Tool request written -> its reply read. */
  readonly toolWait: number
  /** Tool reply read -> commit B written: the result's record, admission, the commit. */
  readonly toCommitB: number
  /** Commit B written -> its acknowledgement read. */
  readonly commitBWait: number
  /** Acknowledgement read -> reply written. */
  readonly toReply: number
}

const isRequest = (e: TimelineEntry) => e[1] === "R" && e[2].startsWith(`MSG ${Subjects.propose} `)

/** A write that carries only the facts' projection: background work, written after the reply, off the path. */
const isProjectionOnly = (e: TimelineEntry) => e[1] === "W" && e[2].startsWith("HPUB $KV.") && !e[2].includes("PUB wk.") && !e[2].includes("PUB _INBOX")

/**
 * The calls of a timeline whose path is the ALLOW path: between one proposal read and the next,
 * exactly four writes (a commit, the tool request, a commit, then the reply), not counting writes
 * of the projection alone. A call whose reads or writes interleave with another's, or that took
 * another path, is left out.
 */
export const callPathsOf = (timeline: ReadonlyArray<TimelineEntry>): Array<CallPath> => {
  const paths: Array<CallPath> = []
  const starts = timeline.flatMap((e, i) => (isRequest(e) ? [i] : []))
  for (let k = 0; k < starts.length; k++) {
    const span = timeline.slice(starts[k]!, starts[k + 1] ?? timeline.length)
    const writes = span.flatMap((e, i) => (e[1] === "W" && !isProjectionOnly(e) ? [i] : []))
    if (writes.length !== 4) continue
    const [a, tool, b, reply] = writes as [number, number, number, number]
    const carries = (i: number, s: string) => span[i]![2].includes(s)
    if (!carries(a, "wk.v1.events.") || !carries(tool, "wk.v1.tools.") || !carries(b, "wk.v1.events.")) continue
    /** The last read before write `w` (after write `after`), or undefined when there is none. */
    const lastRead = (after: number, w: number) => {
      for (let i = w - 1; i > after; i--) if (span[i]![1] === "R") return i
      return undefined
    }
    const ackA = lastRead(a, tool)
    const toolReply = lastRead(tool, b)
    const ackB = lastRead(b, reply)
    if (ackA === undefined || toolReply === undefined || ackB === undefined) continue
    const t = (i: number) => span[i]![0]
    paths.push({
      toCommitA: t(a) - t(0),
      commitAWait: t(ackA) - t(a),
      toTool: t(tool) - t(ackA),
      toolWait: t(toolReply) - t(tool),
      toCommitB: t(b) - t(toolReply),
      commitBWait: t(ackB) - t(b),
      toReply: t(reply) - t(ackB)
    })
  }
  return paths
}

const Quick = process.env["WK_BENCH_QUICK"] === "1"
const Calls = Quick ? 50 : Number(process.env["WK_BENCH_PER_RUN"] ?? 500)

/**
 * Sequential ALLOW calls against a kernel process running the timeline hook; the median of each
 * segment over the calls that took the ALLOW path, and the client's p50 of the same calls.
 */
export const runCriticalPathBench = async (): Promise<Array<Row>> => {
  const nats = await startTestNats()
  const bankConn = await connectAs(nats.servers, "bank")
  const bank = new DemoBank({ openingBalance: 1e12 }).serve(bankConn)
  const file = join(mkdtempSync(join(tmpdir(), "wk-timeline-")), "timeline.json")
  const kernel = await startKernelProcess(nats.servers, profileDir([benchProfile()]), { WK_TIMELINE_FILE: file }, ["--import", join(repoRoot, "bench/internal/socketTimeline.mjs")])
  const agent = await connectAs(nats.servers, "agent")
  const alice = clientFor(agent, "agent:alice")
  let seq = 0
  const call = async () => {
    const r = await alice.propose({ session_id: "path", turn_id: "t", call_id: `p${++seq}`, tool: "money_transfer", args: { from: `a${seq}`, to: "b", amount: 10 } })
    if (r.status !== 200) throw new Error(`critical-path ALLOW got ${JSON.stringify(r)}`)
  }
  const latencies: Array<number> = []
  try {
    for (let i = 0; i < (Quick ? 20 : 300); i++) await call()
    for (let i = 0; i < Calls; i++) {
      const t0 = performance.now()
      await call()
      latencies.push(performance.now() - t0)
    }
  } finally {
    await kernel.stop()
    bank.stop()
    await Promise.all([agent, bankConn].map((c) => c.close()))
    await nats.dispose()
  }
  // The last calls' paths: the warm-up is left out.
  const paths = callPathsOf(JSON.parse(readFileSync(file, "utf8")) as Array<TimelineEntry>).slice(-Calls)
  // Medians of nothing would print as zeros: a timeline the suite cannot read is a failure to see.
  if (paths.length === 0) throw new Error(`critical path: none of the ${Calls} calls' timelines reads as the ALLOW path (${file})`)
  const m = (k: keyof CallPath) => median(paths.map((p) => p[k]))
  const work = m("toCommitA") + m("toTool") + m("toCommitB") + m("toReply")
  const waits = m("commitAWait") + m("toolWait") + m("commitBWait")
  const p50 = median(latencies)
  note("critical path: calls on the ALLOW path / calls timed", paths.length / Calls, "share")
  note("critical path: request read -> commit A written (authentication, decision, plugins)", m("toCommitA"), "ms")
  note("critical path: commit A written -> its and its wake's acks read", m("commitAWait"), "ms")
  note("critical path: acks read -> tool request written", m("toTool"), "ms")
  note("critical path: tool request written -> reply read", m("toolWait"), "ms")
  note("critical path: tool reply read -> commit B written (record, admission)", m("toCommitB"), "ms")
  note("critical path: commit B written -> ack read", m("commitBWait"), "ms")
  note("critical path: ack read -> reply written", m("toReply"), "ms")
  return [
    row("sequential ALLOW: kernel work on the critical path, vs the call's p50", work, p50, "ms"),
    row("sequential ALLOW: waits on NATS and the tool, vs the call's p50", waits, p50, "ms")
  ]
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { printNotes, printTable, notes } = await import("./Table.js")
  printTable(await runCriticalPathBench())
  printNotes(notes)
}
