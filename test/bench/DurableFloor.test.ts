import type { ChildProcess } from "node:child_process"
import type { NatsConnection } from "@nats-io/transport-node"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { floorAllowLatencies, floorAllowThroughput, floorReleaseLatencies, floorStreamCounts, FloorToolSubject, startDurableFloor } from "../../bench/durable-floor.js"
import { connectAs } from "../support/Principals.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"

/**
 * The bench's durable floor does the durable work it claims, counted in its streams: an ALLOW is
 * two commits and one wake, a held call one commit, its release two commits, one wake and one
 * delivery. Figures are not asserted (no timed assertions).
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
    expect(await floorStreamCounts(client)).toEqual({ events: 90, wakes: 45, sessions: 0 })
    expect(toolCalls).toBe(45)
  })

  it("a held release is a held commit, two commits, one wake and one delivery", async () => {
    const before = await floorStreamCounts(client)
    const calls = toolCalls
    const xs = await floorReleaseLatencies(client, 3, "x".repeat(300))
    expect(xs).toHaveLength(3)
    const after = await floorStreamCounts(client)
    expect({ events: after.events - before.events, wakes: after.wakes - before.wakes, sessions: after.sessions - before.sessions }).toEqual({ events: 9, wakes: 3, sessions: 3 })
    expect(toolCalls - calls).toBe(3)
  })
})
