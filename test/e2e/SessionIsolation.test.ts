import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { jetstream } from "@nats-io/jetstream"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { Streams, Subjects } from "../../runtime/schema/Subjects.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"

// Agents under their own NATS users (nats.conf AGENT_ALICE / AGENT_BOB), with namespaced session
// ids: alice proposes, is held, and gets her result; bob cannot read it by any route.
let nats: TestNats
let kernel: InProcessKernel
const conns: Array<NatsConnection> = []

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [testProfile()])
  for (const role of ["bank", "alice", "bob", "witness"] as const) conns.push(await connectAs(nats.servers, role))
  new DemoBank().serve(conns[0]!)
})

afterAll(async () => {
  await kernel?.stop()
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
})

describe("session isolation", () => {
  it("alice's held call is delivered to her session; bob cannot read it", async () => {
    const alice = clientFor(conns[1]!, "agent:alice")
    const session = "alice.s-isolated"
    const small = await alice.propose({ session_id: session, turn_id: "t1", call_id: "small", tool: "money_transfer", args: { from: "iso-a", to: "b", amount: 5 } })
    expect(small).toMatchObject({ status: 200, outcome: "completed" })
    const held = (await alice.propose({ session_id: session, turn_id: "t1", call_id: "big", tool: "money_transfer", args: { from: "iso-b", to: "b", amount: 5000 } })) as { status: number; held_id: string; generation: number; call_digest: string; witness_request: { contract_digest: string } }
    expect(held.status).toBe(202)
    const carol = clientFor(conns[3]!, "user:carol")
    expect((await carol.attest({ held_id: held.held_id, generation: held.generation, call_digest: held.call_digest, contract_digest: held.witness_request.contract_digest, class: "human", decision: "approve" })).status).toBe(202)
    const delivery = await alice.result(held.held_id, { sessionId: session, timeoutMs: 20_000 })
    expect(delivery).toMatchObject({ held_id: held.held_id, session_id: session, outcome: "completed" })
    // Bob, with his own user, cannot open a consumer on alice's session.
    const bobJs = jetstream(conns[2]!, { timeout: 2000 })
    await expect(bobJs.consumers.get(Streams.sessions, { filter_subjects: Subjects.sessionResults(session) }).then((c) => c.next({ expires: 1000 }))).rejects.toThrow(/permission/i)
  })

  it("a session id outside the token grammar is refused naming the field, and nothing is written", async () => {
    const alice = clientFor(conns[1]!, "agent:alice")
    for (const bad of ["alice..s", ".alice", "alice.>", "alice.*", "a b"]) {
      const r = (await alice.propose({ session_id: bad, turn_id: "t1", call_id: "bad", tool: "money_transfer", args: { from: "x", to: "y", amount: 1 } })) as { status: number; error?: { path?: string } }
      expect(r.status, bad).toBe(400)
      expect(r.error?.path, bad).toContain("session_id")
    }
  })
})
