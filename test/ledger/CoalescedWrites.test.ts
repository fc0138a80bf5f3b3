import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { coalesceWrites } from "../../runtime/ledger/CoalescedWrites.js"
import { connectAs } from "../support/Principals.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"

let nats: TestNats
beforeAll(async () => {
  nats = await startTestNats()
})
afterAll(async () => {
  await nats.dispose()
})

interface Protocol {
  readonly outbound: { size(): number }
  readonly pendingLimit: number
  flushPending(): void
}

/** A connection whose protocol handler counts the flushes that wrote something. */
const counted = async (coalesced: boolean) => {
  const nc = await connectAs(nats.servers, "kernel")
  const protocol = (nc as unknown as { protocol: Protocol }).protocol
  const flush = protocol.flushPending.bind(protocol)
  const writes = { count: 0 }
  protocol.flushPending = () => {
    if (protocol.outbound.size() > 0) writes.count++
    flush()
  }
  const installed = coalesced ? coalesceWrites(nc) : false
  return { nc, protocol, writes, installed }
}

const turnEnds = () => new Promise<void>((resolve) => setImmediate(resolve))

/** Subscribes and resolves with the first `n` payloads received, in order. */
const receive = async (nc: NatsConnection, subject: string, n: number) => {
  const got: Array<string> = []
  const sub = nc.subscribe(subject, { max: n })
  await nc.flush()
  const done = (async () => {
    for await (const m of sub) got.push(m.string())
    return got
  })()
  return done
}

describe("socket writes coalesced per event-loop turn (against nats.js's own scheduling)", () => {
  it("installs on the nats.js this repository ships", async () => {
    const { nc, installed } = await counted(true)
    expect(installed).toBe(true)
    await nc.close()
  })

  it("a lone publish is written from a microtask, before the turn ends", async () => {
    const { nc, protocol, writes } = await counted(true)
    await turnEnds()
    const before = writes.count
    nc.publish("wk.test.lone", "x")
    await Promise.resolve()
    await Promise.resolve()
    expect(writes.count).toBe(before + 1)
    expect(protocol.outbound.size()).toBe(0)
    await nc.close()
  })

  it("publishes made over twenty microtask rounds of one turn: nats.js writes twenty times, coalesced twice; every message arrives, in order", async () => {
    const reader = await connectAs(nats.servers, "kernel")
    for (const coalesced of [false, true]) {
      const { nc, writes } = await counted(coalesced)
      const subject = `wk.test.burst.${coalesced}`
      const received = receive(reader, subject, 20)
      await reader.flush()
      await turnEnds()
      const before = writes.count
      for (let i = 0; i < 20; i++) {
        nc.publish(subject, String(i))
        await Promise.resolve()
      }
      await turnEnds()
      expect(writes.count - before).toBe(coalesced ? 2 : 20)
      expect(await received).toEqual(Array.from({ length: 20 }, (_, i) => String(i)))
      await nc.close()
    }
    await reader.close()
  })

  it("a buffer past nats.js's pending limit is still written at once", async () => {
    const { nc, protocol, writes } = await counted(true)
    await turnEnds()
    nc.publish("wk.test.big", "first")
    const before = writes.count
    nc.publish("wk.test.big", new Uint8Array(protocol.pendingLimit + 1))
    expect(writes.count).toBe(before + 1)
    expect(protocol.outbound.size()).toBe(0)
    await nc.close()
  })
})
