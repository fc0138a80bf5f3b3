import { afterAll, beforeAll, describe, expect, it } from "vitest"
import fc from "fast-check"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { signEnvelope } from "../../runtime/schema/EnvelopeSignature.js"
import { devKeyPair } from "../../runtime/client/DevKeys.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventCount } from "../support/Stream.js"

// Hostile input on every protocol subject: the kernel never crashes, always answers with a
// documented error, and writes no event for a rejected request.
let nats: TestNats
let kernel: InProcessKernel
let conn: NatsConnection
let toolConn: NatsConnection
const subjects = [Subjects.propose, Subjects.get, Subjects.attest, Subjects.cancel, Subjects.ack, Subjects.policyApply]
const ops: Record<string, string> = { [Subjects.propose]: "propose", [Subjects.attest]: "attest", [Subjects.cancel]: "cancel", [Subjects.ack]: "ack", [Subjects.policyApply]: "policy.apply" }
const key = devKeyPair("agent:alice").secretKey

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [testProfile()])
  conn = await connectAs(nats.servers, "kernel")
  toolConn = await connectAs(nats.servers, "bank")
  new DemoBank().serve(toolConn)
})

afterAll(async () => {
  await kernel?.stop()
  await Promise.all([conn?.close(), toolConn?.close()])
  await nats?.dispose()
})

const send = async (subject: string, body: Uint8Array) => {
  const m = await conn.request(subject, body, { timeout: 10_000 })
  return JSON.parse(new TextDecoder().decode(m.data)) as { status: number; error?: { code: string; message: string } }
}

const tricky = fc.oneof(
  fc.string(),
  fc.string({ unit: "grapheme" }),
  fc.constantFrom("\u0000", "\uFEFF", "\u202E", "..", "wk.v1.>", "*", ">", "h_" + "0".repeat(32), "💥".repeat(50), "a".repeat(5000))
)
const json = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: "small" }, tricky, fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null), fc.array(tie("value"), { maxLength: 4 }), fc.dictionary(tricky, tie("value"), { maxKeys: 5 }))
})).value

/** Bodies that are not valid requests: raw bytes, arbitrary JSON, envelopes with mangled payloads, wrong types. */
const hostileBody = (subject: string) =>
  fc.oneof(
    fc.uint8Array({ maxLength: 200 }),
    json.map((v) => new TextEncoder().encode(JSON.stringify(v) ?? "null")),
    fc.integer({ min: 65, max: 5000 }).map((d) => new TextEncoder().encode("[".repeat(d) + "]".repeat(d))),
    fc.dictionary(tricky, json, { maxKeys: 6 }).map((payload) => new TextEncoder().encode(JSON.stringify(signEnvelope({ op: ops[subject] ?? "x", principal: "agent:alice", ...payload, args: 7 }, key)))),
    fc.record({ payload: json, key: tricky, sig: tricky }).map((env) => new TextEncoder().encode(JSON.stringify(env)))
  )

describe("hostile input on every protocol subject", () => {
  it.each(subjects)("%s: documented errors only, no event, the kernel keeps serving", async (subject) => {
    const before = await eventCount(conn)
    await fc.assert(
      fc.asyncProperty(hostileBody(subject), async (body) => {
        const r = await send(subject, body)
        expect([400, 401, 403, 404]).toContain(r.status)
        expect(typeof r.error?.code).toBe("string")
        expect(typeof r.error?.message).toBe("string")
      }),
      { numRuns: 120, seed: Number(process.env["WK_FC_SEED"] ?? 20261202) }
    )
    expect(await eventCount(conn)).toBe(before)
    const alice = clientFor(await connectAs(nats.servers, "agent"), "agent:alice")
    const ok = await alice.propose({ session_id: "s-fuzz", turn_id: "t", call_id: `ok-${subject.replace(/\W/g, "-")}`, tool: "money_transfer", args: { from: "fz", to: "b", amount: 1 } })
    expect(ok.status).toBe(200)
    await alice.nc.close()
  })

  it.each(subjects)("%s: an oversized request (over 1 MiB, under the server's 2 MB) is a 400 naming the limit, no event", async (subject) => {
    const before = await eventCount(conn)
    const big = signEnvelope({ op: ops[subject] ?? "x", principal: "agent:alice", session_id: "s-fuzz", turn_id: "t", call_id: "big", tool: "money_transfer", args: { blob: "x".repeat(1_100_000) } }, key)
    const r = await send(subject, new TextEncoder().encode(JSON.stringify(big)))
    expect(r.status).toBe(400)
    expect(r.error?.code).toBe("invalid_request")
    expect(r.error?.message).toContain("limit")
    expect(await eventCount(conn)).toBe(before)
  })

  it("a replayed signed request is the same request: one held call, no second effect", async () => {
    const body = new TextEncoder().encode(JSON.stringify(signEnvelope({ op: "propose", principal: "agent:alice", session_id: "s-fuzz", turn_id: "t", call_id: "replay", tool: "money_transfer", args: { from: "rp", to: "b", amount: 5 }, nonce: "fuzz-replay", expires_at: new Date(Date.now() + 300_000).toISOString() }, key)))
    const replies = await Promise.all(Array.from({ length: 10 }, () => send(Subjects.propose, body)))
    expect(new Set(replies.map((r) => r.status))).toEqual(new Set([200]))
    expect(new Set(replies.map((r) => (r as unknown as { held_id: string }).held_id)).size).toBe(1)
  })
})
