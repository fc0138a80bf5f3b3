import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { execFile } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import type { NatsConnection } from "@nats-io/transport-node"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { deliveryBackoffMs, type DeliveryRetry } from "../../runtime/heldcall/Reconciler.js"
import type { HeldEvent } from "../../runtime/schema/Events.js"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { startDeployment, type Deployment } from "../support/Deployment.js"
import { eventsOf, eventually } from "../support/Stream.js"

// Delivery of a held call's end to its session: republished with growing gaps while nobody
// acknowledges it, stopped (and recorded) at the call's expiry plus the grace period, never
// republished once acknowledged; an ended call is not counted as open.
const retry: DeliveryRetry = { baseMs: 100, maxMs: 800, graceMs: 2_000 }

let deployment: Deployment
let kernelConn: NatsConnection
let alice: WitnessClient
let carol: WitnessClient

let n = 0
const propose = async (expiresInMs: number) => {
  const r = (await alice.propose({
    session_id: "s-delivery",
    turn_id: "t1",
    call_id: `dl${++n}`,
    tool: "money_transfer",
    args: { from: `dl-${n}`, to: "shop", amount: 2_500 },
    preferences: { expires_in_ms: expiresInMs }
  })) as { status: number; held_id: string; call_digest: string; generation: number; witness_request: { contract_digest: string } }
  expect(r.status).toBe(202)
  return r
}

type Ev<T extends HeldEvent["type"]> = Extract<HeldEvent, { type: T }> & { seq: number }
const ofType = <T extends HeldEvent["type"]>(events: ReadonlyArray<HeldEvent & { seq: number }>, type: T) => events.filter((e): e is Ev<T> => e.type === type)

beforeAll(async () => {
  deployment = await startDeployment(1, { config: { delivery: retry } })
  ;({ alice, carol, kernelConn } = deployment.parties)
})

afterAll(() => deployment?.stop(), 60_000)

describe("bounded delivery", () => {
  it("a delivery nobody acknowledges is republished with growing gaps and stops, recorded, at expiry plus grace", async () => {
    const h = await propose(800)
    const events = await eventually(async () => {
      const es = await eventsOf(kernelConn, h.held_id)
      return ofType(es, "delivery.stopped").length > 0 ? es : null
    }, 60_000)
    const expiresAt = Date.parse(ofType(events, "call.proposed")[0]!.expires_at)
    expect(events.some((e) => e.type === "call.expired")).toBe(true)
    const published = ofType(events, "delivery.published")
    const [stopped] = ofType(events, "delivery.stopped")
    // The first delivery and at least two republishes happen inside the grace period.
    expect(published.length).toBeGreaterThanOrEqual(3)
    expect(published.map((p) => p.attempt)).toEqual(published.map((_, i) => i + 1))
    for (let i = 1; i < published.length; i++) {
      const gap = Date.parse(published[i]!.at) - Date.parse(published[i - 1]!.at)
      expect(gap).toBeGreaterThanOrEqual(deliveryBackoffMs(i, retry))
    }
    // Every republish precedes the deadline; the stop follows it and is the last delivery event.
    for (const p of published) expect(Date.parse(p.at)).toBeLessThan(expiresAt + retry.graceMs)
    expect(stopped).toMatchObject({ delivery_id: published[0]!.delivery_id, attempts: published.length })
    expect(Date.parse(stopped!.at)).toBeGreaterThanOrEqual(expiresAt + retry.graceMs)
    expect(stopped!.seq).toBeGreaterThan(published.at(-1)!.seq)

    // Nothing is scheduled for the call any more, and it published no further delivery.
    await eventually(deployment.controllerIdle, 30_000)
    const after = await eventsOf(kernelConn, h.held_id)
    expect(ofType(after, "delivery.published").length).toBe(published.length)
    expect((await alice.get(h.held_id)).held).toMatchObject({ lifecycle: "expired", continuation_delivery: "delivered", delivery_stopped_at: stopped!.at })
    expect(await deployment.openIndexHas(h.held_id)).toBe(false)

    // A late acknowledgment is still recorded.
    expect(await alice.ack(h.held_id, stopped!.delivery_id)).toMatchObject({ status: 200, continuation_delivery: "acknowledged" })
  }, 90_000)

  it("an acknowledged delivery is not republished", async () => {
    const h = await propose(120_000)
    expect((await carol.attest({ held_id: h.held_id, class: "human", decision: "approve", generation: h.generation, call_digest: h.call_digest, contract_digest: h.witness_request.contract_digest })).status).toBe(202)
    const d = await alice.result(h.held_id, { sessionId: "s-delivery", timeoutMs: 30_000 })
    expect(d.outcome).toBe("completed")
    const acked = await eventually(async () => {
      const es = await eventsOf(kernelConn, h.held_id)
      return ofType(es, "delivery.acknowledged").length > 0 ? es : null
    })
    const publishedAtAck = ofType(acked, "delivery.published").length
    // With a 100 ms base, an unacknowledged delivery would be republished many times before the
    // controller has nothing left to schedule; acknowledged, it has nothing at once.
    await eventually(deployment.controllerIdle, 30_000)
    const after = await eventsOf(kernelConn, h.held_id)
    expect(ofType(after, "delivery.published").length).toBe(publishedAtAck)
    expect(ofType(after, "delivery.stopped")).toEqual([])
    expect((await alice.get(h.held_id)).held).toMatchObject({ lifecycle: "completed", continuation_delivery: "acknowledged" })
    // Acknowledged, nothing is left to happen to it: it leaves the open-call index.
    await eventually(async () => !(await deployment.openIndexHas(h.held_id)))
  }, 60_000)

  it("status and held ls count only open calls; an ended call whose delivery is owed is shown apart", async () => {
    const open = await propose(120_000)
    const done = await propose(120_000)
    expect((await carol.attest({ held_id: done.held_id, class: "human", decision: "approve", generation: done.generation, call_digest: done.call_digest, contract_digest: done.witness_request.contract_digest })).status).toBe(202)
    // Completed through admission, its delivery unacknowledged: the index keeps it (delivery is
    // still owed, recovery revisits it) but it is not open.
    await eventually(async () => ofType(await eventsOf(kernelConn, done.held_id), "delivery.published").length > 0)
    expect(await deployment.openIndexHas(done.held_id)).toBe(true)
    expect(await deployment.openIndexHas(open.held_id)).toBe(true)

    const run = promisify(execFile)
    const env: Record<string, string | undefined> = { ...process.env, NATS_URL: `nats://${deployment.nats.servers}`, WK_CONFIG_DIR: mkdtempSync(join(tmpdir(), "wk-config-")) }
    delete env["WK_CONTEXT"]
    const wk = async (...args: Array<string>) => (await run(process.execPath, [join(repoRoot, "runtime", "cli", "wk.mjs"), ...args], { env, timeout: 60_000 })).stdout
    const status = JSON.parse(await wk("status", "--json")) as { open_held_calls: { total: number; by_state: Record<string, number> }; ended_held_calls_indexed: { by_delivery: Record<string, number> } }
    const ls = JSON.parse(await wk("held", "ls", "--json")) as Array<{ held_id: string; state: string }>
    expect(ls.map((r) => r.held_id)).toContain(open.held_id)
    expect(ls.map((r) => r.held_id)).not.toContain(done.held_id)
    expect(ls.every((r) => r.state.startsWith("open"))).toBe(true)
    expect(status.open_held_calls.total).toBe(ls.length)
    expect(Object.values(status.open_held_calls.by_state).reduce((a, b) => a + b, 0)).toBe(ls.length)
    expect(status.ended_held_calls_indexed.by_delivery).toMatchObject({ "delivery delivered": 1 })
    expect(status.open_held_calls.by_state["completed"]).toBeUndefined()

    // Acknowledged, it leaves the index.
    const [d] = ofType(await eventsOf(kernelConn, done.held_id), "delivery.published")
    expect((await alice.ack(done.held_id, d!.delivery_id)).status).toBe(200)
    await eventually(async () => !(await deployment.openIndexHas(done.held_id)))
  }, 120_000)
})
