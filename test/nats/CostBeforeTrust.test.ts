import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { devKeyPair } from "../../runtime/client/DevKeys.js"
import { signEnvelope } from "../../runtime/schema/EnvelopeSignature.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"

// Cost before trust, with only the `agent` login: large bodies that fail authentication must not
// stall the small calls of everyone else. The attacker signs with a registered principal's
// public key (public knowledge) and a signature that does not verify.
let nats: TestNats
let kernel: InProcessKernel
let conns: Array<NatsConnection> = []
let alice: WitnessClient

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [testProfile()])
  conns = await Promise.all((["agent", "agent", "bank"] as const).map((r) => connectAs(nats.servers, r)))
  alice = clientFor(conns[0]!, "agent:alice")
  new DemoBank().serve(conns[2]!)
})

afterAll(async () => {
  await kernel?.stop()
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
})

let n = 0
/** One small ALLOW and how long its answer took. */
const smallAllow = async (): Promise<number> => {
  const t0 = performance.now()
  const r = await alice.propose({ session_id: "s-cost", turn_id: "t1", call_id: `c${++n}`, tool: "money_transfer", args: { from: `acct-c${n}`, to: "shop", amount: 5 } })
  expect(r).toMatchObject({ status: 200, outcome: "completed" })
  return performance.now() - t0
}

/** A 0.9 MiB propose for agent:alice, with her registered key and a signature over something else. */
const badSignatureBody = (i: number): Uint8Array => {
  const payload = { op: "propose", principal: "agent:alice", session_id: "s-cost", turn_id: "t-big", call_id: `big${i}`, tool: "money_transfer", args: Object.fromEntries(Array.from({ length: 9000 }, (_, k) => [`k${k}`, { a: "x".repeat(60), b: [1, 2, 3], c: { d: true } }])) }
  const forged = { ...signEnvelope({ op: "propose", principal: "agent:alice", note: "other bytes" }, devKeyPair("agent:alice").secretKey), payload }
  const bytes = new TextEncoder().encode(JSON.stringify(forged))
  expect(bytes.length).toBeGreaterThan(900 * 1024)
  expect(bytes.length).toBeLessThan(1024 * 1024)
  return bytes
}

describe("cost before trust", () => {
  it("six 0.9 MiB bodies with a bad signature are refused (401) without stalling a small ALLOW sent after them: it is answered before the last refusal, within a generous multiple of its idle latency", async () => {
    const idle: Array<number> = []
    for (let i = 0; i < 7; i++) idle.push(await smallAllow())
    const floor = idle.sort((a, b) => a - b)[3]!
    const bodies = Array.from({ length: 6 }, (_, i) => badSignatureBody(i))
    const order: Array<string> = []
    const attacker = conns[1]!
    const refusals = bodies.map((b) =>
      attacker.request(Subjects.propose, b, { timeout: 60_000 }).then((m) => {
        order.push("refused")
        return m.json<{ status: number; error: { code: string; message: string } }>()
      })
    )
    await attacker.flush()
    const during = await smallAllow()
    order.push("allow")
    const replies = await Promise.all(refusals)
    for (const r of replies) expect(r).toMatchObject({ status: 401, error: { code: "unauthenticated", message: "signature does not verify over the JCS of payload" } })
    // The ALLOW queued behind six large checks, not behind their cost on the event loop.
    expect(order.indexOf("allow")).toBeLessThan(order.length - 1)
    expect(during).toBeLessThan(Math.max(20 * floor, floor + 1000))
  }, 120_000)
})
