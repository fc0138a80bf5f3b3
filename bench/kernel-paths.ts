import { spawn, type ChildProcess } from "node:child_process"
import { availableParallelism } from "node:os"
import { join } from "node:path"
import { jetstream } from "@nats-io/jetstream"
import type { NatsConnection, Subscription } from "@nats-io/transport-node"
import { repoRoot } from "../runtime/cli/Paths.js"
import { BareAllowSubject, BareReleaseSubject, BareToolSubject } from "./bare-kernel.js"
import { measureDbos } from "./dbos-workflow.js"
import { measureLangGraph } from "./langgraph-workflow.js"
import { floorAllowLatencies, floorAllowThroughput, floorReleaseLatencies, FloorToolSubject, startDurableFloor, workFloorLatencies, workFloorReleaseLatencies, workFloorThroughput } from "./durable-floor.js"
import { DemoBank } from "../runtime/executor/DemoBank.js"
import { randomBytes } from "node:crypto"
import type { AttestReply, ProposeReply, WitnessClient } from "../runtime/client/Client.js"
import { Subjects } from "../runtime/schema/Subjects.js"
import { startTestNats, type TestNats } from "../test/support/TestNats.js"
import { clientFor, connectAs } from "../test/support/Principals.js"
import { benchProfile } from "./BenchProfile.js"
import { profileDir, startKernelProcess, type KernelProcess } from "../test/support/KernelProcess.js"
import { judgedAgainstReach, median, note, percentile, printTable, row, skippedRow, type Row } from "./Table.js"
import { cpuSeconds } from "./ProcessCpu.js"

/** WK_BENCH_QUICK=1: one run of few calls, to see every row produced in seconds (figures are noise). */
const Quick = process.env["WK_BENCH_QUICK"] === "1"
const Runs = Number(process.env["WK_BENCH_RUNS"] ?? (Quick ? 1 : 5))
const PerRun = Number(process.env["WK_BENCH_PER_RUN"] ?? (Quick ? 20 : 200))
/** Calls per throughput run (64 agents), and per warm-up. */
const ThroughputCalls = Quick ? 200 : 2000
const WarmupCalls = Quick ? 64 : 500
const Payload = "x".repeat(300)
/** Extra node flags for the kernel processes, e.g. WK_BENCH_KERNEL_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof". */
const KernelNodeArgs = (process.env["WK_BENCH_KERNEL_NODE_ARGS"] ?? "").split(" ").filter((s) => s !== "")
/** Events the kernel appends on the ALLOW path: proposed, adjudicated, leased, dispatched, recorded, admitted. */
const AllowEvents = 6
/** Events from an accepted attestation to the delivery: accepted, readiness, leased, dispatched, recorded, admitted, delivery.published. */
const ReleaseEvents = 7

interface Env {
  readonly nats: TestNats
  readonly agent: NatsConnection
  readonly witness: NatsConnection
  readonly kernelConn: NatsConnection
  /** A second kernel-user connection: the floor's "agent" side (agents may not publish arbitrary subjects). */
  readonly floorClient: NatsConnection
  readonly tool: NatsConnection
  /** The bench's echo tool service (the floor's tool), as its own tool user. */
  readonly echo: NatsConnection
  readonly bank: DemoBank
  readonly kernels: Array<KernelProcess>
  readonly profiles: string
  /** The floor's kernel process (bench/bare-kernel.ts) and the echo tool it calls, served here. */
  readonly bare: ChildProcess
  readonly bareTool: Subscription
  /** The durable floor's process (bench/durable-floor.ts); its tool is the same echo (`bareTool`). */
  readonly durable: ChildProcess
}

const startBareKernel = async (servers: string): Promise<ChildProcess> => {
  const child = spawn(process.execPath, ["--disable-warning=ExperimentalWarning", "--import", "tsx", join(repoRoot, "bench/bare-kernel.ts"), servers, String(AllowEvents), String(ReleaseEvents)], { cwd: repoRoot, stdio: ["ignore", "pipe", "inherit"] })
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (d: Buffer) => d.toString().includes("bare kernel ready") && resolve())
    child.once("exit", (code) => reject(new Error(`bench/bare-kernel.ts exited with ${code}`)))
  })
  return child
}

const setup = async (): Promise<Env> => {
  const nats = await startTestNats()
  const profiles = profileDir([benchProfile()])
  const tool = await connectAs(nats.servers, "bank")
  const bank = new DemoBank({ openingBalance: 1e12 }).serve(tool)
  const echo = await connectAs(nats.servers, "echo")
  return {
    nats,
    agent: await connectAs(nats.servers, "agent"),
    witness: await connectAs(nats.servers, "witness"),
    kernelConn: await connectAs(nats.servers, "kernel"),
    floorClient: await connectAs(nats.servers, "kernel"),
    tool,
    echo,
    bank,
    kernels: [await startKernelProcess(nats.servers, profiles, {}, KernelNodeArgs)],
    profiles,
    bare: await startBareKernel(nats.servers),
    bareTool: echo.subscribe(BareToolSubject, { callback: (_x, m) => void m.respond(m.data) }),
    durable: await startDurableFloor(nats.servers)
  }
}

let seq = 0
const nextCall = (amount: number, session = "bench") => ({ session_id: session, turn_id: "t", call_id: `b${++seq}`, tool: "money_transfer", args: { from: `a${seq}`, to: "b", amount } })
const encoder = new TextEncoder()

/**
 * A proposal signed and encoded as `WitnessClient.propose` does (a fresh nonce, a 5-minute
 * expiry), before any timed window opens: the client's signing is the client's work, not the
 * kernel's, and the floors' clients sign outside their windows too.
 */
const signedProposal = (client: WitnessClient, call: ReturnType<typeof nextCall>): Uint8Array =>
  encoder.encode(JSON.stringify(client.sign({ op: "propose", ...call, nonce: randomBytes(12).toString("hex"), expires_at: new Date(Date.now() + 300_000).toISOString() })))

/** Sends a proposal signed beforehand. */
const sendProposal = (client: WitnessClient, body: Uint8Array): Promise<ProposeReply> => client.request<ProposeReply>(Subjects.propose, body)

/**
 * The floor of one ALLOW call: a request/reply to the bare kernel process, which makes one tool
 * round trip (to an echo in this process, where the bench's tool runs too) and the appends as
 * bare publishes. The same process hops as the measured path, none of the kernel's work.
 */
const allowFloor = (e: Env, n: number): Promise<Array<number>> => bareFloor(e, BareAllowSubject, n)

const bareFloor = async (e: Env, subject: string, n: number): Promise<Array<number>> => {
  const out: Array<number> = []
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    await e.floorClient.request(subject, Payload, { timeout: 5000 })
    out.push(performance.now() - t0)
  }
  return out
}

/** The earlier floor, kept as a note: the same exchanges from one process (no kernel or tool process hop). */
const oneProcessFloor = async (e: Env, n: number, events: number, session: boolean): Promise<Array<number>> => {
  const echo = e.kernelConn.subscribe("bench.echo", { callback: (_x, m) => void m.respond(m.data) })
  await e.kernelConn.flush()
  const js = jetstream(e.kernelConn)
  const out: Array<number> = []
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    await e.floorClient.request("bench.echo", Payload)
    await e.kernelConn.request("bench.echo", Payload)
    for (let k = 0; k < events; k++) await js.publish(`wk.v1.events.bench_floor_${i}`, Payload, { msgID: `floor-${seq}-${i}-${k}` })
    if (session) await js.publish(Subjects.sessionResults("bench-floor"), Payload)
    out.push(performance.now() - t0)
  }
  seq++
  echo.unsubscribe()
  return out
}

const allowPath = async (e: Env, n: number): Promise<Array<number>> => {
  const alice = clientFor(e.agent, "agent:alice")
  const out: Array<number> = []
  for (let i = 0; i < n; i++) {
    const body = signedProposal(alice, nextCall(10))
    const t0 = performance.now()
    const r = await sendProposal(alice, body)
    out.push(performance.now() - t0)
    if (r.status !== 200) throw new Error(`ALLOW bench got ${JSON.stringify(r)}`)
  }
  return out
}

const allowThroughput = async (e: Env, total: number, agents = 64): Promise<number> => {
  if (total <= 0) return 0
  const alice = clientFor(e.agent, "agent:alice")
  const bodies = Array.from({ length: total }, () => signedProposal(alice, nextCall(10)))
  let left = total
  const t0 = performance.now()
  await Promise.all(
    Array.from({ length: agents }, async () => {
      while (left > 0) {
        const r = await sendProposal(alice, bodies[--left]!)
        if (r.status !== 200) throw new Error(`throughput bench got ${JSON.stringify(r)}`)
      }
    })
  )
  return total / ((performance.now() - t0) / 1000)
}

const publishRate = async (e: Env, total: number, inFlight = 1000): Promise<number> => {
  const js = jetstream(e.kernelConn)
  const t0 = performance.now()
  for (let i = 0; i < total; i += inFlight) {
    await Promise.all(Array.from({ length: Math.min(inFlight, total - i) }, (_, k) => js.publish(`wk.v1.events.bench_rate_${(i + k) % 5000}`, Payload, { msgID: `rate-${seq}-${i + k}` })))
  }
  seq++
  return total / ((performance.now() - t0) / 1000)
}

/** Acknowledges a delivery, again while the kernel has not yet recorded it as published (409 `not_delivered`). */
const acknowledge = async (agent: WitnessClient, heldId: string, deliveryId: string): Promise<void> => {
  for (let attempt = 0; ; attempt++) {
    const r = await agent.ack(heldId, deliveryId)
    if (r.status === 200) return
    if (r.error?.code !== "not_delivered" || attempt === 50) throw new Error(`release bench ack: ${JSON.stringify(r)}`)
    await new Promise((resolve) => setTimeout(resolve, 2))
  }
}

/**
 * Attestation accepted -> result delivered to the session subject. The agent then acknowledges
 * the delivery, as a real agent does (outside the timed window): an unacknowledged delivery is
 * republished with backoff for minutes, which would load the kernel under the figures after it.
 */
const heldRelease = async (e: Env, n: number): Promise<Array<number>> => {
  const alice = clientFor(e.agent, "agent:alice")
  const carol = clientFor(e.witness, "user:carol")
  const out: Array<number> = []
  const waiting = new Map<string, (delivered: { at: number; deliveryId: string }) => void>()
  const sub = e.agent.subscribe(Subjects.sessionResults("bench-held"), {
    callback: (_x, m) => {
      const d = m.json<{ held_id: string; delivery_id: string }>()
      waiting.get(d.held_id)?.({ at: performance.now(), deliveryId: d.delivery_id })
      waiting.delete(d.held_id)
    }
  })
  await e.agent.flush()
  for (let i = 0; i < n; i++) {
    const h = (await alice.propose(nextCall(5000, "bench-held"))) as { held_id: string; generation: number; call_digest: string; witness_request: { contract_digest: string } }
    const delivered = new Promise<{ at: number; deliveryId: string }>((r) => waiting.set(h.held_id, r))
    const now = Date.now()
    // Signed as `WitnessClient.attest` signs, before the timed window.
    const attestation = encoder.encode(
      JSON.stringify(
        carol.sign({ op: "attest", held_id: h.held_id, generation: h.generation, call_digest: h.call_digest, contract_digest: h.witness_request.contract_digest, class: "human", decision: "approve", issued_at: new Date(now).toISOString(), expires_at: new Date(now + 600_000).toISOString(), nonce: randomBytes(12).toString("hex") })
      )
    )
    const t0 = performance.now()
    const a = await carol.request<AttestReply>(Subjects.attest, attestation)
    if (a.disposition !== "accepted") throw new Error(`release bench: ${JSON.stringify(a)}`)
    const d = await delivered
    out.push(d.at - t0)
    await acknowledge(alice, h.held_id, d.deliveryId)
  }
  sub.unsubscribe()
  return out
}

/** The release floor: the bare kernel's tool round trip, the release's appends and the session publish. */
const releaseFloor = (e: Env, n: number): Promise<Array<number>> => bareFloor(e, BareReleaseSubject, n)

/**
 * Runs `f` Runs times and returns the median of each run's p50 and p99, and the CPU the process
 * `cpuPid` used per sample over the measured runs (the warm-up excluded).
 */
const repeated = async (f: () => Promise<Array<number>>, cpuPid?: number) => {
  await f() // warm-up, excluded
  const p50s: Array<number> = []
  const p99s: Array<number> = []
  let cpu = 0
  let samples = 0
  for (let r = 0; r < Runs; r++) {
    const c0 = cpuPid === undefined ? 0 : cpuSeconds(cpuPid)
    const xs = await f()
    cpu += cpuPid === undefined ? 0 : cpuSeconds(cpuPid) - c0
    samples += xs.length
    p50s.push(median(xs))
    p99s.push(percentile(xs, 0.99))
  }
  return { p50: median(p50s), p99: median(p99s), cpuMsPerSample: (cpu / Math.max(1, samples)) * 1000 }
}

/** The work floor's figures in this run: what a target is judged reachable against. */
interface WorkFloor {
  readonly p50: number
  /** Its rate from 64 agents, on one event loop. */
  readonly rate: number
  /** The most calls per second any kernel reaches here: the box's cores over the CPU each work floor call costs. */
  readonly rateBound: number
}

/** What a rival durable-workflow engine's run gave, with the same tool and sizes: per-run latencies and rates, or why it was not measured. */
type RivalOutcome<F> = { readonly figures: F & { readonly latencies: ReadonlyArray<ReadonlyArray<number>>; readonly rates: ReadonlyArray<number> } } | { readonly skipped: string }

interface Rival<F> {
  readonly name: string
  readonly figure: string
  /** Why it is switched off in this run, if it is. */
  readonly off: string | undefined
  readonly measure: () => Promise<RivalOutcome<F>>
  /** Throws when the run did not do what it claims (a failed bench, not a skipped row). */
  readonly check: (figures: F) => void
}

/**
 * A rival's rows: its figures next to the durable floor's, and the kernel's ALLOW next to its
 * (target: ahead of it), each judged against what the work floor leaves reachable. "skipped" with
 * the reason when the rival is switched off or its package or server is not there.
 */
const rivalRows = async <F>(rival: Rival<F>, allowP50: number, allowRate: number, floorP50: number, floorRate: number, work: WorkFloor): Promise<Array<Row>> => {
  const figures = [`${rival.figure} p50 vs durable floor`, `${rival.name} throughput, 64 agents, vs durable floor's`, `ALLOW p50 vs ${rival.name} p50`, `ALLOW throughput, 64 agents, vs ${rival.name}'s`] as const
  const skippedAll = (why: string) => [skippedRow(figures[0], "ms", why), skippedRow(figures[1], "calls/s", why), skippedRow(figures[2], "ms", why, "< 1x"), skippedRow(figures[3], "calls/s", why, "> 1x")]
  if (rival.off !== undefined) return skippedAll(rival.off)
  const outcome = await rival.measure().catch((err: unknown): RivalOutcome<F> => ({ skipped: `${rival.name} failed: ${err instanceof Error ? err.message : String(err)}` }))
  if ("skipped" in outcome) return skippedAll(outcome.skipped)
  rival.check(outcome.figures)
  const { latencies, rates } = outcome.figures
  const p50 = median(latencies.map(median))
  const rate = median(rates)
  note(`${rival.name} p99 (sequential)`, median(latencies.map((xs) => percentile(xs, 0.99))), "ms")
  return [
    row(figures[0], p50, floorP50, "ms"),
    row(figures[1], rate, floorRate, "calls/s"),
    judgedAgainstReach(row(figures[2], allowP50, p50, "ms", "< 1x"), work.p50 / p50),
    judgedAgainstReach(row(figures[3], allowRate, rate, "calls/s", "> 1x"), work.rateBound / rate, "the cores at the work floor's CPU per call")
  ]
}

/** DBOS on the same box (WK_BENCH_DBOS=0 skips it on purpose); every workflow must be recorded as a success. */
const dbos = (e: Env): Rival<{ readonly succeeded: number; readonly ran: number }> => ({
  name: "DBOS",
  figure: "DBOS workflow (1 step: the tool)",
  off: process.env["WK_BENCH_DBOS"] === "0" ? "WK_BENCH_DBOS=0" : undefined,
  measure: () => measureDbos({ nc: e.floorClient, toolSubject: BareToolSubject, payload: Payload, runs: Runs, perRun: PerRun, total: ThroughputCalls }),
  check: ({ succeeded, ran }) => {
    if (succeeded !== ran) throw new Error(`DBOS bench: ${ran} workflows ran, ${succeeded} recorded as SUCCESS`)
  }
})

/** LangGraph with a PostgreSQL checkpointer (WK_BENCH_LANGGRAPH=0 skips it on purpose); every call's thread must be checkpointed. */
const langGraph = (e: Env): Rival<{ readonly checkpointed: number; readonly ran: number }> => ({
  name: "LangGraph",
  figure: "LangGraph + PostgresSaver (1 node: the tool)",
  off: process.env["WK_BENCH_LANGGRAPH"] === "0" ? "WK_BENCH_LANGGRAPH=0" : undefined,
  measure: () => measureLangGraph({ nc: e.floorClient, toolSubject: BareToolSubject, payload: Payload, runs: Runs, perRun: PerRun, total: ThroughputCalls }),
  check: ({ checkpointed, ran }) => {
    if (checkpointed !== ran) throw new Error(`LangGraph bench: ${ran} calls ran, ${checkpointed} threads checkpointed`)
  }
})

export const runKernelPathBench = async (): Promise<Array<Row>> => {
  if (FloorToolSubject !== BareToolSubject) throw new Error("the floors must call the same echo tool")
  const e = await setup()
  try {
    const releases = Math.max(Quick ? 10 : 20, PerRun / 4)
    // The floor: the minimal durable work of an ALLOW call (two CAS'd commits, the wake, the tool, the reply).
    const floor = await repeated(() => floorAllowLatencies(e.floorClient, PerRun, Payload), e.durable.pid ?? 0)
    note("durable floor process CPU per sequential ALLOW call", floor.cpuMsPerSample, "ms")
    // The work floor: the same durable work, plus what no kernel of this profile can skip (bench/internal/callWork.ts).
    const workFloor = await repeated(() => workFloorLatencies(e.floorClient, PerRun), e.durable.pid ?? 0)
    note("work floor process CPU per sequential ALLOW call", workFloor.cpuMsPerSample, "ms")
    const bare = await repeated(() => allowFloor(e, PerRun))
    note("earlier ALLOW floor (bare kernel: tool + 6 appends awaited one by one), p50", bare.p50, "ms")
    note("earlier ALLOW floor from one process (no kernel or tool process hop), p50", (await repeated(() => oneProcessFloor(e, PerRun, AllowEvents, false))).p50, "ms")
    const allow = await repeated(() => allowPath(e, PerRun), e.kernels[0]!.pid)
    note("kernel CPU per sequential ALLOW call", allow.cpuMsPerSample, "ms")
    const rFloor = await repeated(() => floorReleaseLatencies(e.floorClient, releases, Payload))
    note("earlier release floor (bare kernel: tool + 7 appends + session publish), p50", (await repeated(() => releaseFloor(e, releases))).p50, "ms")
    note("earlier release floor from one process, p50", (await repeated(() => oneProcessFloor(e, releases, ReleaseEvents, true))).p50, "ms")
    const rWork = await repeated(() => workFloorReleaseLatencies(e.floorClient, releases))
    const release = await repeated(() => heldRelease(e, releases), e.kernels[0]!.pid)
    note("kernel CPU per held call (propose, hold, attest, release, acknowledgment)", release.cpuMsPerSample, "ms")
    const rates: Array<number> = []
    const pubRates: Array<number> = []
    const floorRates: Array<number> = []
    await allowThroughput(e, WarmupCalls)
    await floorAllowThroughput(e.floorClient, WarmupCalls, Payload)
    await workFloorThroughput(e.floorClient, WarmupCalls)
    const workRates: Array<number> = []
    const workCpu = { floor: 0, nats: 0, client: 0 }
    // CPU per call of each process during the one-kernel throughput runs: what bounds the rate.
    const kernelPid = e.kernels[0]!.pid
    const cpu = { kernel: 0, nats: 0, client: 0, calls: 0, floor: 0, floorNats: 0 }
    for (let r = 0; r < Runs; r++) {
      pubRates.push(await publishRate(e, Quick ? 1000 : 10_000))
      const f0 = cpuSeconds(e.durable.pid ?? 0), fn0 = cpuSeconds(e.nats.pid)
      floorRates.push(await floorAllowThroughput(e.floorClient, ThroughputCalls, Payload))
      cpu.floor += cpuSeconds(e.durable.pid ?? 0) - f0
      cpu.floorNats += cpuSeconds(e.nats.pid) - fn0
      const w0 = cpuSeconds(e.durable.pid ?? 0), wn0 = cpuSeconds(e.nats.pid), wc0 = process.cpuUsage()
      workRates.push(await workFloorThroughput(e.floorClient, ThroughputCalls))
      const wc1 = process.cpuUsage(wc0)
      workCpu.floor += cpuSeconds(e.durable.pid ?? 0) - w0
      workCpu.nats += cpuSeconds(e.nats.pid) - wn0
      workCpu.client += (wc1.user + wc1.system) / 1e6
      const k0 = cpuSeconds(kernelPid), n0 = cpuSeconds(e.nats.pid), c0 = process.cpuUsage()
      rates.push(await allowThroughput(e, ThroughputCalls))
      const c1 = process.cpuUsage(c0)
      cpu.kernel += cpuSeconds(kernelPid) - k0
      cpu.nats += cpuSeconds(e.nats.pid) - n0
      cpu.client += (c1.user + c1.system) / 1e6
      cpu.calls += ThroughputCalls
    }
    const oneKernel = median(rates)
    const sharedCores = (availableParallelism() * cpu.calls) / (cpu.kernel + cpu.nats + cpu.client)
    note("the box's CPU bound on kernels of this one's CPU per call (cores / CPU of a call: kernel, server, client)", sharedCores, "calls/s")
    note("earlier ALLOW throughput floor (JetStream publish rate, 1,000 in flight / 6 events)", median(pubRates) / AllowEvents, "calls/s")
    note("kernel CPU per ALLOW call, 64 agents", (cpu.kernel / cpu.calls) * 1000, "ms")
    note("nats-server CPU per ALLOW call, 64 agents", (cpu.nats / cpu.calls) * 1000, "ms")
    note("bench client CPU per ALLOW call (64 agents, signing)", (cpu.client / cpu.calls) * 1000, "ms")
    note("durable floor process CPU per ALLOW call, 64 agents", (cpu.floor / cpu.calls) * 1000, "ms")
    note("nats-server CPU per durable floor call, 64 agents", (cpu.floorNats / cpu.calls) * 1000, "ms")
    note("work floor process CPU per ALLOW call, 64 agents", (workCpu.floor / cpu.calls) * 1000, "ms")
    note("nats-server CPU per work floor call, 64 agents", (workCpu.nats / cpu.calls) * 1000, "ms")
    note("bench client CPU per work floor call (64 agents, signing)", (workCpu.client / cpu.calls) * 1000, "ms")
    // Spread over every core with nothing lost to waiting, the work floor's calls, the server's
    // and the client's share of them still cost this much CPU: no kernel, however parallel, goes faster here.
    const boxBound = (availableParallelism() * cpu.calls) / (workCpu.floor + workCpu.nats + workCpu.client)
    const work: WorkFloor = { p50: workFloor.p50, rate: median(workRates), rateBound: Math.max(boxBound, median(workRates)) }
    const rivals = [...(await rivalRows(dbos(e), allow.p50, oneKernel, floor.p50, median(floorRates), work)), ...(await rivalRows(langGraph(e), allow.p50, oneKernel, floor.p50, median(floorRates), work))]
    const rows = [
      judgedAgainstReach(row("ALLOW propose->200 p50 vs durable floor (2 commits + wake, tool, reply)", allow.p50, floor.p50, "ms", "<= 1.5x"), work.p50 / floor.p50),
      row("ALLOW propose->200 p99 vs durable floor p99", allow.p99, floor.p99, "ms"),
      judgedAgainstReach(row("ALLOW throughput, 64 agents, vs durable floor's", oneKernel, median(floorRates), "calls/s", ">= 0.3x"), work.rateBound / median(floorRates), `${availableParallelism()} cores at the work floor's CPU per call`),
      judgedAgainstReach(row("held release: attest -> delivered p50 vs floor (2 commits + wake, tool, delivery)", release.p50, rFloor.p50, "ms", "<= 2x"), rWork.p50 / rFloor.p50),
      row("work floor (durable floor + the work no kernel can skip) p50 vs durable floor", work.p50, floor.p50, "ms"),
      row("work floor throughput, 64 agents, vs durable floor's (the work alone, on one event loop)", work.rate, median(floorRates), "calls/s"),
      row("ALLOW p50 vs work floor p50", allow.p50, work.p50, "ms"),
      row("work floor release (attestation checked, admission, delivery) p50 vs release floor", rWork.p50, rFloor.p50, "ms"),
      row("held release p50 vs work floor release p50", release.p50, rWork.p50, "ms"),
      row("ALLOW throughput, 64 agents, vs work floor's", oneKernel, work.rate, "calls/s"),
      row(`the box's CPU bound on any kernel's rate (${availableParallelism()} cores / CPU of a work floor call: floor, server, client) vs durable floor's`, work.rateBound, median(floorRates), "calls/s")
    ]
    // A second kernel that does not start (a loaded box) costs its row, not the figures above.
    const second = await startKernelProcess(e.nats.servers, e.profiles, {}, KernelNodeArgs).catch((err: unknown) => String(err instanceof Error ? err.message.split("\n")[0] : err))
    if (typeof second === "string") return [...rows, skippedRow("two kernel processes vs one, ALLOW throughput", "calls/s", second, ">= 1.6x"), ...rivals]
    e.kernels.push(second)
    await allowThroughput(e, WarmupCalls)
    const twoRates: Array<number> = []
    const two = { kernels: 0, calls: 0 }
    for (let r = 0; r < Runs; r++) {
      const k0 = e.kernels.reduce((t, k) => t + cpuSeconds(k.pid), 0)
      twoRates.push(await allowThroughput(e, ThroughputCalls))
      two.kernels += e.kernels.reduce((t, k) => t + cpuSeconds(k.pid), 0) - k0
      two.calls += ThroughputCalls
    }
    note("kernel CPU per ALLOW call, two kernels (sum)", (two.kernels / two.calls) * 1000, "ms")
    return [
      ...rows,
      // Two kernels share the box's cores with the server and the client: at the CPU per call the
      // one-kernel runs measured (two kernels spend no less each), the cores bound the rate of both.
      judgedAgainstReach(row("two kernel processes vs one, ALLOW throughput", median(twoRates), oneKernel, "calls/s", ">= 1.6x"), sharedCores / oneKernel, `${availableParallelism()} cores at this kernel's CPU per call`),
      ...rivals
    ]
  } finally {
    // SIGINT, so that a --cpu-prof profile is written
    await Promise.all(e.kernels.map((k) => k.stop()))
    e.bareTool.unsubscribe()
    e.bare.kill("SIGKILL")
    e.durable.kill("SIGKILL")
    e.bank.stop()
    await Promise.all([e.agent, e.witness, e.kernelConn, e.floorClient, e.tool, e.echo].map((c) => c.close()))
    await e.nats.dispose()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  printTable(await runKernelPathBench())
}
