import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Effect } from "effect"
import { jetstream } from "@nats-io/jetstream"
import type { NatsConnection } from "@nats-io/transport-node"
import type { Delivery } from "../../runtime/client/Client.js"
import { layerNats } from "../../runtime/ledger/Nats.js"
import { provision } from "../../runtime/ledger/Provision.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import { Roles, startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs } from "../support/Principals.js"

// An agent reads its result from the session stream, then acknowledges it to a kernel. With no
// kernel answering (every kernel down, or the agent cut off from them), the result it read is
// still its answer: the acknowledgment is tried again briefly and then left to the kernel's
// republishing, never turned into a failure of the read.

let nats: TestNats
let agentConn: NatsConnection
let kernelConn: NatsConnection

beforeAll(async () => {
  nats = await startTestNats()
  await Effect.runPromise(Effect.scoped(provision()).pipe(Effect.provide(layerNats({ servers: nats.servers, ...Roles.kernel }))))
  agentConn = await connectAs(nats.servers, "agent")
  kernelConn = await connectAs(nats.servers, "kernel")
})

afterAll(async () => {
  await Promise.all([agentConn, kernelConn].map((c) => c?.close()))
  await nats?.dispose()
})

describe("a result read while no kernel answers its acknowledgment", () => {
  it("given a delivery on the session and no kernel, when the agent waits for its result, then it gets the delivery", async () => {
    const delivery: Delivery = {
      held_id: "h_" + "c".repeat(32),
      session_id: "s-noack",
      turn_id: "t1",
      call_id: "c1",
      continuation_ref: null,
      outcome: "completed",
      ok: true,
      admission: "admitted",
      result: { receipt: "r-1" },
      call_digest: "sha256:" + "0".repeat(64),
      delivery_id: "d_1"
    }
    await jetstream(kernelConn).publish(Subjects.sessionResults("s-noack"), JSON.stringify(delivery))
    const alice = clientFor(agentConn, "agent:alice", 2_000)
    // No kernel serves wk.v1.calls.ack here: each try is refused at once ("no responders").
    await expect(alice.ack(delivery.held_id, delivery.delivery_id)).rejects.toThrow()
    expect(await alice.result(delivery.held_id, { sessionId: "s-noack", timeoutMs: 10_000 })).toEqual(delivery)
  }, 30_000)
})
