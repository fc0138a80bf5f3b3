import type { ChildProcess } from "node:child_process"
import type { NatsConnection } from "@nats-io/transport-node"
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import { jetstreamManager } from "@nats-io/jetstream"
import { FloorStreams, floorAllowLatencies, floorAllowThroughput, floorReleaseLatencies, floorStreamCounts, FloorToolSubject, FloorWorkAllowSubject, FloorWorkHoldSubject, FloorWorkReleaseSubject, startDurableFloor, workFloorLatencies, workFloorReleaseLatencies, workFloorThroughput } from "../../bench/durable-floor.js"
import { devKeyPair } from "../../runtime/client/DevKeys.js"
import { signEnvelope } from "../../runtime/schema/EnvelopeSignature.js"
import { connectAs } from "../support/Principals.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"

/**
 * The bench's durable floor does the durable work it claims, counted in its streams: an ALLOW is
 * two commits and one wake (deleted once the call is settled), a held call one commit, its release two commits, one wake and one
 * delivery. The work floor does the same durable work with the work no kernel can skip: the
 * request's signature checked, the plugin stages run, their records in the commits. Figures are
 * not asserted (no timed assertions).
 */
describe("bench durable floor", () => {
  let nats: TestNats
  let client: NatsConnection
  let echo: NatsConnection
  let floor: ChildProcess
  let toolCalls = 0

  beforeAll(async () => {
    nats = await startTestNats()
    client = await connectAs(nats.servers, "kernel")
    echo = await connectAs(nats.servers, "echo")
    echo.subscribe(FloorToolSubject, { callback: (_e, m) => void (toolCalls++, m.respond(m.data)) })
    await echo.flush()
    floor = await startDurableFloor(nats.servers)
  }, 60_000)

  /** Every wake written is deleted once its call's commit B is stored (fire and forget, so waited for). */
  const wakesDeleted = () => vi.waitFor(async () => expect((await floorStreamCounts(client)).pendingWakes).toBe(0), { timeout: 10_000, interval: 50 })

  afterAll(async () => {
    floor?.kill("SIGKILL")
    await client?.close()
    await echo?.close()
    await nats?.dispose()
  })

  it("commits twice and wakes once per ALLOW call, sequential and concurrent", async () => {
    const seq = await floorAllowLatencies(client, 5, "x".repeat(300))
    expect(seq).toHaveLength(5)
    const rate = await floorAllowThroughput(client, 40, "x".repeat(300), 8)
    expect(rate).toBeGreaterThan(0)
    expect(await floorStreamCounts(client)).toMatchObject({ events: 90, wakes: 45, sessions: 0 })
    await wakesDeleted()
    expect(toolCalls).toBe(45)
  })

  it("the work floor commits twice and wakes once per ALLOW, with the plugin stages' records in its commits", async () => {
    const before = await floorStreamCounts(client)
    const calls = toolCalls
    expect(await workFloorLatencies(client, 3)).toHaveLength(3)
    expect(await workFloorThroughput(client, 8, 4)).toBeGreaterThan(0)
    const after = await floorStreamCounts(client)
    expect({ events: after.events - before.events, wakes: after.wakes - before.wakes }).toEqual({ events: 22, wakes: 11 })
    await wakesDeleted()
    expect(toolCalls - calls).toBe(11)
    const jsm = await jetstreamManager(client)
    const last = (await jsm.streams.getMessage(FloorStreams.events.name, { seq: after.events }))!
    type Stored = { held_id: string; events: Array<{ type: string; decisions?: Array<{ output: { stage: string } }> }> }
    const b = last.json<Stored>()
    expect(b.events.map((e) => e.type)).toEqual(["effect.recorded", "result.admitted"])
    expect(b.events[1]!.decisions!.map((d) => d.output.stage)).toEqual(["admit"])
    // Commit A is the first message on the call's subject (concurrent calls interleave in the stream).
    const a = (await jsm.direct.getMessage(FloorStreams.events.name, { next_by_subj: FloorStreams.events.subject(b.held_id), seq: 1 }))!.json<Stored>()
    expect(a.events.map((e) => e.type)).toEqual(["call.proposed", "call.adjudicated", "execution.leased", "effect.dispatched"])
    expect(a.events[1]!.decisions!.map((d) => d.output.stage)).toEqual(["transform", "adjudicate", "adjudicate"])
  })

  it("the work floor refuses a request whose signature does not verify, and stores nothing for it", async () => {
    const before = await floorStreamCounts(client)
    const payload = { op: "propose", principal: "agent:alice", session_id: "floor", turn_id: "t", call_id: "forged", tool: "money_transfer", args: { from: "a", to: "b", amount: 10 } }
    const forged = { ...signEnvelope(payload, devKeyPair("agent:alice").secretKey), payload: { ...payload, args: { from: "a", to: "b", amount: 99_999 } } }
    const reply = await client.request(FloorWorkAllowSubject, JSON.stringify(forged), { timeout: 5000 })
    expect(reply.string()).toMatch(/^error: .*bad signature/)
    expect(await floorStreamCounts(client)).toEqual(before)
  })

  it("the work floor's release is a held commit, two commits, one wake and one delivery, after the attestation checked", async () => {
    const before = await floorStreamCounts(client)
    const calls = toolCalls
    expect(await workFloorReleaseLatencies(client, 3)).toHaveLength(3)
    const after = await floorStreamCounts(client)
    expect({ events: after.events - before.events, wakes: after.wakes - before.wakes, sessions: after.sessions - before.sessions }).toEqual({ events: 9, wakes: 3, sessions: 3 })
    await wakesDeleted()
    expect(toolCalls - calls).toBe(3)
  })

  it("the work floor refuses an attestation bound to other digests, and releases nothing", async () => {
    const h = JSON.parse((await client.request(FloorWorkHoldSubject, "x", { timeout: 5000 })).string()) as { id: string; call_digest: string; contract_digest: string }
    const before = await floorStreamCounts(client)
    const now = Date.now()
    const other = "0".repeat(64)
    const attestation = signEnvelope({ op: "attest", principal: "user:carol", class: "human", held_id: h.id, generation: 1, call_digest: other, contract_digest: h.contract_digest, decision: "approve", issued_at: new Date(now).toISOString(), expires_at: new Date(now + 60_000).toISOString(), nonce: "0123456789abcdef" }, devKeyPair("user:carol").secretKey)
    const reply = await client.request(FloorWorkReleaseSubject, JSON.stringify(attestation), { timeout: 5000 })
    expect(reply.string()).toMatch(/^error: .*binds another call/)
    expect(await floorStreamCounts(client)).toEqual(before)
  })

  it("a held release is a held commit, two commits, one wake and one delivery", async () => {
    const before = await floorStreamCounts(client)
    const calls = toolCalls
    const xs = await floorReleaseLatencies(client, 3, "x".repeat(300))
    expect(xs).toHaveLength(3)
    const after = await floorStreamCounts(client)
    expect({ events: after.events - before.events, wakes: after.wakes - before.wakes, sessions: after.sessions - before.sessions }).toEqual({ events: 9, wakes: 3, sessions: 3 })
    await wakesDeleted()
    expect(toolCalls - calls).toBe(3)
  })
})
