import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { profileDir, startKernelProcess, type KernelProcess } from "../support/KernelProcess.js"
import { eventCount, eventsOf, eventually } from "../support/Stream.js"

// A kernel stopped cleanly (SIGINT or SIGTERM, as in a rolling upgrade) while agents are calling: it takes
// no new request (the others in the queue group do), answers every request it took, and a
// request still waiting past the tool timeout (a blocking proposal) is answered 503 to be sent
// again rather than left to time out. Agents here give up after 5 s, not the default 15.
let nats: TestNats
let agentConn: NatsConnection
let toolConn: NatsConnection
let kernelConn: NatsConnection
let witnessConn: NatsConnection
/** How long the bank takes to answer a transfer it applied (a slow tool). */
let toolDelayMs = 0
let bank: DemoBank
let profiles: string
const kernels: Array<KernelProcess> = []
const profile = testProfile({
  grants: { "agent:alice": ["money_transfer"] },
  rules: { money_transfer: { amount_field: "amount", witness_above: 1000, deny_above: 100_000, contract: { rule: { class: "human" } } } }
})

const startKernel = async () => {
  const k = await startKernelProcess(nats.servers, profiles, { WK_TOOL_TIMEOUT_MS: "1000" })
  kernels.push(k)
  return k
}

let n = 0
const transfer = (amount: number, preferences?: Record<string, unknown>) => ({
  session_id: "s-stop",
  turn_id: "t1",
  call_id: `g${++n}`,
  tool: "money_transfer",
  args: { from: `acct-g${n}`, to: "shop", amount },
  ...(preferences !== undefined ? { preferences: preferences as never } : {})
})

const isRunning = (k: KernelProcess) => k.child.exitCode === null && k.child.signalCode === null

/** Warnings and errors a kernel logged (JSON lines at level 40 or 50). */
const complaints = (k: KernelProcess) => k.output().split("\n").filter((line) => /"level":(40|50)/.test(line))

beforeAll(async () => {
  nats = await startTestNats()
  agentConn = await connectAs(nats.servers, "agent")
  toolConn = await connectAs(nats.servers, "bank")
  kernelConn = await connectAs(nats.servers, "kernel")
  witnessConn = await connectAs(nats.servers, "witness")
  bank = new DemoBank({ openingBalance: 1e9, onApplied: () => (toolDelayMs > 0 ? new Promise((r) => setTimeout(r, toolDelayMs)) : undefined) }).serve(toolConn)
  profiles = profileDir([profile])
  await Promise.all([startKernel(), startKernel()])
}, 240_000)

afterAll(async () => {
  await Promise.all(kernels.map((k) => k.kill()))
  bank?.stop()
  await Promise.all([agentConn, toolConn, kernelConn, witnessConn].map((c) => c?.close()))
  await nats?.dispose()
})

describe("a kernel stopped cleanly (SIGINT, or SIGTERM where said)", () => {
  it("under load answers every request it took, the other kernel the rest: no agent times out, one effect per answer", async () => {
    const alice = clientFor(agentConn, "agent:alice", 5_000)
    const [first] = kernels
    const statuses = new Map<string, number>()
    let answered = 0
    let answeredAfterStop = 0
    let stopped = false
    let running = true
    const agent = async () => {
      while (running) {
        const reply = await alice.propose(transfer(10)).catch((e: unknown) => ({ status: String(e) }))
        statuses.set(String(reply.status), (statuses.get(String(reply.status)) ?? 0) + 1)
        answered++
        if (stopped) answeredAfterStop++
      }
    }
    const agents = Array.from({ length: 16 }, agent)
    await eventually(async () => answered >= 150, 60_000)
    const stopping = first!.stop()
    stopped = true
    await stopping
    await eventually(async () => answeredAfterStop >= 150, 60_000)
    running = false
    await Promise.all(agents)

    expect([...statuses.keys()]).toEqual(["200"])
    expect(bank.effects).toBe(statuses.get("200"))
    expect(first!.child.exitCode ?? first!.child.signalCode).not.toBeNull()
    expect(complaints(first!)).toEqual([])
  }, 180_000)

  it("answers a blocking proposal still waiting past the tool timeout 503, to be sent again; sent again, another kernel answers it", async () => {
    // The client waits long enough for a second kernel to start on a loaded box; the bound on the
    // answer is measured from the stop.
    const alice = clientFor(agentConn, "agent:alice", 30_000)
    // One kernel running, so it is the one the proposal reaches.
    const running = kernels.filter(isRunning)
    for (const k of running.slice(1)) await k.stop()
    const waiting = running.slice(0, 1)
    expect(waiting).toHaveLength(1)
    const call = transfer(5_000, { wait: { mode: "block", max_ms: 20_000 } })
    const before = await eventCount(kernelConn)
    const blocked = alice.propose(call)
    // The proposal is committed, held (nobody attests), and its kernel waits for it to end.
    await eventually(async () => (await eventCount(kernelConn)) > before, 30_000)
    const next = await startKernel()
    const t0 = Date.now()
    await waiting[0]!.stop()
    const reply = await blocked
    expect(reply).toMatchObject({ status: 503, error: { code: "unavailable", message: expect.stringContaining("stopping") } })
    expect(Date.now() - t0).toBeLessThan(8_000)

    // The same call sent again (a fresh envelope) reaches the kernel still running: the same held call, still held.
    const again = (await alice.propose({ ...call, preferences: { wait: { mode: "block", max_ms: 500 } } as never })) as { status: number; outcome?: string; held_id: string }
    expect(again).toMatchObject({ status: 202, outcome: "held" })
    expect((await eventsOf(kernelConn, again.held_id)).filter((e) => e.type === "call.proposed")).toHaveLength(1)
    expect(complaints(next)).toEqual([])
    expect(bank.effects).toBe(bank.byKey.size)
  }, 180_000)

  it("(SIGTERM) lets a drive it is running finish: an approval's tool request in flight as it stops is recorded and delivered by it, no other kernel running", async () => {
    for (const k of kernels.filter(isRunning)) await k.stop()
    const k = await startKernel()
    const alice = clientFor(agentConn, "agent:alice", 10_000)
    const carol = clientFor(witnessConn, "user:carol")
    const h = (await alice.propose(transfer(5_000))) as { status: number; held_id: string; generation: number; call_digest: string; witness_request: { contract_digest: string } }
    expect(h.status).toBe(202)
    toolDelayMs = 500
    const approved = await carol.attest({ held_id: h.held_id, generation: h.generation, call_digest: h.call_digest, contract_digest: h.witness_request.contract_digest, class: "human", decision: "approve" })
    expect(approved.disposition).toBe("accepted")
    // The bank has the transfer and takes its time to answer; the kernel is stopped meanwhile.
    await eventually(async () => (bank.invocations.get(`${h.held_id}:g${h.generation}`) ?? 0) > 0, 10_000)
    // SIGTERM, as a container runtime stops a process: the same clean stop as SIGINT.
    const exited = new Promise((resolve) => k.child.once("exit", resolve))
    k.child.kill("SIGTERM")
    await exited
    toolDelayMs = 0

    const types = (await eventsOf(kernelConn, h.held_id)).map((e) => e.type)
    expect(types).toContain("effect.recorded")
    expect(types).toContain("delivery.published")
    expect(bank.invocations.get(`${h.held_id}:g${h.generation}`)).toBe(1)
    expect(complaints(k)).toEqual([])
  }, 180_000)
})
