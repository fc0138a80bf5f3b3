import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../runtime/executor/DemoBank.js"
import { devKeyPair } from "../runtime/client/DevKeys.js"
import { signEnvelope } from "../runtime/schema/EnvelopeSignature.js"
import { Subjects } from "../runtime/schema/Subjects.js"
import { startTestNats } from "../test/support/TestNats.js"
import { clientFor, connectAs } from "../test/support/Principals.js"
import { startKernel } from "../test/support/InProcessKernel.js"
import { benchProfile } from "./BenchProfile.js"
import { median, note, percentile, row, type Row } from "./Table.js"

const Calls = Number(process.env["WK_BENCH_HOSTILE_CALLS"] ?? 60)
/** Large bodies with a bad signature kept in flight at once while the small calls run. */
const BadInFlight = 4

let seq = 0
const small = () => ({ session_id: "hostile", turn_id: "t", call_id: `s${++seq}`, tool: "money_transfer", args: { from: `a${seq}`, to: "b", amount: 10 } })

/** A 0.9 MiB propose with agent:alice's registered key and a signature over other bytes. */
const badBody = (): Uint8Array => {
  const payload = { op: "propose", principal: "agent:alice", session_id: "hostile", turn_id: "bad", call_id: `bad${++seq}`, tool: "money_transfer", args: Object.fromEntries(Array.from({ length: 9000 }, (_, k) => [`k${k}`, { a: "x".repeat(60), b: [1, 2, 3], c: { d: true } }])) }
  return new TextEncoder().encode(JSON.stringify({ ...signEnvelope({ op: "propose", principal: "agent:alice", note: "other" }, devKeyPair("agent:alice").secretKey), payload }))
}

/**
 * A signed call the benchmarked plugins take long over: data-egress scans every string argument
 * (here 400 strings of 100 characters; more runs path-canon out of its 16 pages), while the small ALLOWs need the same plugin.
 */
const slowCall = () => ({ ...small(), turn_id: "slow", args: { from: `slow${seq}`, to: "b", amount: 10, notes: Array.from({ length: 400 }, (_, i) => `note ${i} ${"y".repeat(92)}`) } })

const timeSmall = async (agent: NatsConnection, n: number): Promise<Array<number>> => {
  const alice = clientFor(agent, "agent:alice")
  const out: Array<number> = []
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    const r = await alice.propose(small())
    out.push(performance.now() - t0)
    if (r.status !== 200) throw new Error(`small ALLOW got ${JSON.stringify(r)}`)
  }
  return out
}

/**
 * A small ALLOW's latency while an attacker keeps large bad-signature bodies in flight and a
 * signed call keeps a plugin busy, against the same ALLOW on the idle kernel in the same run.
 */
export const runHostileLoadBench = async (): Promise<Array<Row>> => {
  const nats = await startTestNats()
  const conns = await Promise.all((["bank", "agent", "agent", "agent"] as const).map((r) => connectAs(nats.servers, r)))
  const [bankConn, agent, attacker, heavy] = conns as [NatsConnection, NatsConnection, NatsConnection, NatsConnection]
  const bank = new DemoBank({ openingBalance: 1e12 }).serve(bankConn)
  // In this process (a kernel process can take over 30 s to start on a loaded box); the attacker's
  // bodies are built once, so this process's own work during the run is sending and receiving.
  const kernel = await startKernel(nats.servers, [benchProfile()])
  try {
    await timeSmall(agent, 30)
    const idle = await timeSmall(agent, Calls)
    // Built once: the bench process's own JSON work must not be what it measures.
    const bodies = Array.from({ length: BadInFlight }, badBody)
    let running = true
    let refused = 0
    let slowDone = 0
    const bad = bodies.map(async (body) => {
      while (running) {
        const m = await attacker.request(Subjects.propose, body, { timeout: 60_000 })
        if (m.json<{ status: number }>().status !== 401) throw new Error(`bad signature got ${m.string()}`)
        refused++
      }
    })
    const slowAlice = clientFor(heavy, "agent:alice", 60_000)
    const slow = (async () => {
      while (running) {
        const r = await slowAlice.propose(slowCall())
        if (r.status !== 200) throw new Error(`slow call got ${JSON.stringify(r)}`)
        slowDone++
      }
    })()
    const loaded = await timeSmall(agent, Calls)
    running = false
    await Promise.all([...bad, slow])
    note(`hostile load: bad-signature 0.9 MiB bodies refused (${BadInFlight} in flight) during ${Calls} small ALLOWs`, refused, "bodies")
    note("hostile load: signed calls with 400 string arguments (data-egress scans each) during them", slowDone, "calls")
    return [
      row("small ALLOW p50 under hostile load", median(loaded), median(idle), "ms", "< 3x idle p50"),
      row("small ALLOW p99 under hostile load", percentile(loaded, 0.99), percentile(idle, 0.99), "ms", "< 5x idle p99")
    ]
  } finally {
    await kernel.stop()
    bank.stop()
    await Promise.all(conns.map((c) => c.close()))
    await nats.dispose()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { printNotes, printTable, notes } = await import("./Table.js")
  printTable(await runHostileLoadBench())
  printNotes(notes)
}
