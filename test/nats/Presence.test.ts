import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventsOf, eventually } from "../support/Stream.js"

// Presence against an attacker holding only the shared `agent` login: whatever it subscribes to,
// it cannot keep a confined agent's session present, so cancel_on_disconnect still cancels.
let nats: TestNats
let kernel: InProcessKernel
let kernelConn: NatsConnection
let attacker: NatsConnection
let reader: WitnessClient

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [testProfile()], { config: { presenceIntervalMs: 150 } })
  kernelConn = await connectAs(nats.servers, "kernel")
  attacker = await connectAs(nats.servers, "agent")
  reader = clientFor(kernelConn, "admin:root")
  new DemoBank().serve(await connectAs(nats.servers, "bank"))
})

afterAll(async () => {
  await kernel?.stop()
  await Promise.all([kernelConn, attacker].map((c) => c?.close()))
  await nats?.dispose()
})

const lifecycle = async (heldId: string) => ((await reader.get(heldId)).held as Record<string, unknown>)["lifecycle"]

describe("presence", () => {
  it("a confined agent's parked call is cancelled when it disconnects, though the shared agent login tries every presence wildcard", async () => {
    for (const subject of ["wk.v1.presence.>", "wk.v1.presence.*.>", "wk.v1.presence.alice.>", "wk.v1.presence.*.*.live"]) attacker.subscribe(subject, { callback: () => undefined })
    await attacker.flush()
    const aliceConn = await connectAs(nats.servers, "alice")
    const alice = clientFor(aliceConn, "agent:alice")
    const session = `alice.p${Date.now().toString(36)}`
    const h = (await alice.propose({ session_id: session, turn_id: "t1", call_id: "c1", tool: "money_transfer", args: { from: "acct-p", to: "shop", amount: 4_000 }, preferences: { cancel_on_disconnect: true } } as never)) as { status: number; held_id: string }
    expect(h.status).toBe(202)
    // Present while her connection lives: several presence passes leave it open.
    await new Promise((r) => setTimeout(r, 600))
    expect(await lifecycle(h.held_id)).toBe("open")
    await aliceConn.close()
    await eventually(async () => (await lifecycle(h.held_id)) === "cancelled", 15_000)
    const cancelled = (await eventsOf(kernelConn, h.held_id)).find((e) => e.type === "call.cancelled")
    expect(cancelled).toMatchObject({ by: "kernel", reason: `session ${session} disconnected (cancel_on_disconnect)` })
  }, 60_000)
})
