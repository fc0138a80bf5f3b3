import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventually } from "../support/Stream.js"
import { failedChecks, replayAs } from "../audit/support.js"

// Batch approval: one signed attestation for several held calls, each item bound to its own
// generation and digests; all-or-nothing or each on its own; the auditor checks every item.
let nats: TestNats
let kernel: InProcessKernel
let bank: DemoBank
let agentConn: NatsConnection
let witnessConn: NatsConnection
let toolConn: NatsConnection
let alice: WitnessClient
let carol: WitnessClient

let n = 0
const held = async (amount = 2_000) => {
  const r = (await alice.propose({ session_id: "s-batch", turn_id: "t1", call_id: `b${++n}`, tool: "money_transfer", args: { from: `batch-${n}`, to: "shop", amount } })) as { status: number; held_id: string }
  expect(r.status).toBe(202)
  return r.held_id
}
const lifecycle = async (heldId: string) => (await carol.get(heldId)).held!["lifecycle"]

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [testProfile()])
  toolConn = await connectAs(nats.servers, "bank")
  bank = new DemoBank().serve(toolConn)
  agentConn = await connectAs(nats.servers, "agent")
  witnessConn = await connectAs(nats.servers, "witness")
  alice = clientFor(agentConn, "agent:alice")
  carol = clientFor(witnessConn, "user:carol")
}, 60_000)

afterAll(async () => {
  await kernel?.stop()
  await Promise.all([agentConn, witnessConn, toolConn].map((c) => c?.close()))
  await nats?.dispose()
})

describe("batch approval", () => {
  it("one signed attestation releases three held calls, each run once", async () => {
    const ids = [await held(), await held(), await held()]
    const r = await carol.attestBatch(ids, "human")
    expect(r).toMatchObject({ status: 200, disposition: "recorded", results: ids.map((held_id) => ({ held_id, status: 202, disposition: "accepted" })) })
    await eventually(async () => bank.effects === 3)
    for (const id of ids) await eventually(async () => (await lifecycle(id)) === "completed")
  })

  it("mode all: one item no longer current refuses the whole batch and records nothing; mode each: the others go through", async () => {
    const more = [await held(), await held()]
    const gone = await held()
    expect((await alice.cancel(gone)).status).toBe(200)
    // The cancelled call is still readable, so the batch names its current digests; the kernel refuses the batch.
    const all = await carol.attestBatch([...more, gone], "human", "approve", "all")
    expect(all).toMatchObject({ status: 409, disposition: "refused", results: [{ disposition: "accepted" }, { disposition: "accepted" }, { held_id: gone, disposition: "stale" }] })
    for (const id of more) expect(await lifecycle(id)).toBe("open")
    const each = await carol.attestBatch([...more, gone], "human", "approve", "each")
    expect(each).toMatchObject({ status: 200, results: [{ disposition: "accepted" }, { disposition: "accepted" }, { held_id: gone, status: 409, disposition: "stale" }] })
    for (const id of more) await eventually(async () => (await lifecycle(id)) === "completed")
  })

  it("the proposer cannot batch-approve its own calls, and a call named twice is refused", async () => {
    const ids = [await held(), await held()]
    const own = await clientFor(witnessConn, "agent:alice").attestBatch(ids, "agent", "approve", "each")
    expect(own.results?.map((x) => x.disposition)).toEqual(["invalid", "invalid"])
    const twice = await carol.request<{ status: number; error?: { path?: string } }>(
      "wk.v1.held.attest_batch",
      carol.sign({ op: "attest_batch", principal: "user:carol", class: "human", decision: "approve", mode: "each", items: [0, 1].map(() => ({ held_id: ids[0], generation: 1, call_digest: "a".repeat(64), contract_digest: "b".repeat(64) })), issued_at: new Date().toISOString(), expires_at: new Date(Date.now() + 60_000).toISOString(), nonce: "twice-123" })
    )
    expect(twice).toMatchObject({ status: 400, error: { path: "payload.items.1.held_id" } })
    for (const id of ids) expect(await lifecycle(id)).toBe("open")
  })

  it("the auditor checks each item of every batch", async () => {
    expect(failedChecks(await replayAs(nats.servers, "auditor"))).toEqual([])
  })
})
