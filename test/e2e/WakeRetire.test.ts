import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { jetstreamManager } from "@nats-io/jetstream"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { ControllerConsumer } from "../../runtime/ledger/Provision.js"
import { Streams } from "../../runtime/schema/Subjects.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { profileDir, startKernelProcess, type KernelProcess } from "../support/KernelProcess.js"
import { eventually } from "../support/Stream.js"

// Every ALLOW writes a recovery wake as it claims its call, and the wake queue is shared by the
// kernels: with two of them, half the wakes are handed to the kernel that did not drive the call.
// That kernel leaves such a wake until the driver's lease ends (10 s here) and then reads the
// call cold to find it finished. The kernel that settles a call deletes the wake it wrote and its
// own controller did not take, so no wake outlives its call; recovery of a kernel that dies
// mid-call (its wake stays) is test/e2e/Recovery.test.ts.
let nats: TestNats
let agentConn: NatsConnection
let toolConn: NatsConnection
let kernelConn: NatsConnection
let bank: DemoBank
const kernels: Array<KernelProcess> = []
const profile = testProfile({ grants: { "agent:alice": ["money_transfer"] }, rules: { money_transfer: { amount_field: "amount", witness_above: 1000, contract: { rule: { class: "human" } } } } })

beforeAll(async () => {
  nats = await startTestNats()
  agentConn = await connectAs(nats.servers, "agent")
  toolConn = await connectAs(nats.servers, "bank")
  kernelConn = await connectAs(nats.servers, "kernel")
  bank = new DemoBank({ openingBalance: 1e9 }).serve(toolConn)
  const profiles = profileDir([profile])
  kernels.push(...(await Promise.all([0, 1].map(() => startKernelProcess(nats.servers, profiles, { WK_LEASE_MS: "10000" })))))
}, 240_000)

afterAll(async () => {
  await Promise.all(kernels.map((k) => k.kill()))
  bank?.stop()
  await Promise.all([agentConn, toolConn, kernelConn].map((c) => c?.close()))
  await nats?.dispose()
})

describe("wakes of calls two kernels share", () => {
  it("200 ALLOW calls from 16 agents over two kernels: one effect each, and no wake left for a lease to end", async () => {
    const alice = clientFor(agentConn, "agent:alice")
    let n = 0
    const statuses: Array<number> = []
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (n < 200) {
          const i = ++n
          const r = await alice.propose({ session_id: "s-wakes", turn_id: "t1", call_id: `w${i}`, tool: "money_transfer", args: { from: `acct-w${i}`, to: "shop", amount: 10 } })
          statuses.push(r.status)
        }
      })
    )
    expect(statuses.filter((s) => s === 200)).toHaveLength(200)
    expect(bank.effects).toBe(200)
    const jsm = await jetstreamManager(kernelConn)
    // Well inside the 10 s lease: a wake left to it would still be stored (or handed out, unacked).
    await eventually(async () => {
      const [stream, consumer] = await Promise.all([jsm.streams.info(Streams.wakes), jsm.consumers.info(Streams.wakes, ControllerConsumer)])
      return stream.state.messages === 0 && consumer.num_ack_pending === 0 && consumer.num_pending === 0
    }, 4_000)
    // Each call wrote its wake: 200 of them went through the queue.
    const info = await jsm.streams.info(Streams.wakes)
    expect(info.state.last_seq).toBeGreaterThanOrEqual(200)
  }, 60_000)
})
