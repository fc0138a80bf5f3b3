import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { DeliveryRetry } from "../../runtime/heldcall/Reconciler.js"
import type { Parties } from "../support/Parties.js"
import { startDeployment, type Deployment } from "../support/Deployment.js"
import { eventsOf, eventually } from "../support/Stream.js"

// Two kernels answer the same queue group, so a call parked by one is often released by the
// other, and acknowledged or proposed again through either. A kernel's recent view of a call
// another kernel moved on is stale: an answer that writes nothing (an acknowledgment refused as
// "not ended", the same proposal again refused as a conflict) must not be read off it. Every
// call must end acknowledged, unindexed, with no republish after the acknowledgment and no wake
// left behind.
const retry: DeliveryRetry = { baseMs: 100, maxMs: 400, graceMs: 2_000 }

let deployment: Deployment
let parties: Parties

beforeAll(async () => {
  deployment = await startDeployment(2, { config: { delivery: retry } })
  parties = deployment.parties
}, 120_000)

afterAll(() => deployment?.stop(), 60_000)

describe("a delivery acknowledged through another kernel", () => {
  it("given two kernels, when each released call is acknowledged through either, then every call ends acknowledged, unindexed and never republished after, and the same proposal again answers its result", async () => {
    const { alice, carol, kernelConn } = parties
    const calls = []
    for (let i = 0; i < 8; i++) {
      const call = { session_id: "s-across", turn_id: "t1", call_id: `ax${i}`, tool: "money_transfer", args: { from: `ax-${i}`, to: "shop", amount: 2_500 }, preferences: { expires_in_ms: 120_000 } }
      const h = (await alice.propose(call)) as {
        status: number
        held_id: string
        call_digest: string
        generation: number
        witness_request: { contract_digest: string }
      }
      expect(h.status).toBe(202)
      expect((await carol.attest({ held_id: h.held_id, class: "human", decision: "approve", generation: h.generation, call_digest: h.call_digest, contract_digest: h.witness_request.contract_digest })).status).toBe(202)
      expect((await alice.result(h.held_id, { sessionId: "s-across", timeoutMs: 30_000 })).outcome).toBe("completed")
      // The same proposal again, through either kernel (the one that parked it remembers it held):
      // the call's answer as it stands, its result, never the hold it no longer is.
      const again = (await alice.propose(call)) as { status: number; outcome?: string; held_id: string }
      expect([again.status, again.outcome, again.held_id]).toEqual([200, "completed", h.held_id])
      calls.push(h.held_id)
    }
    for (const heldId of calls) {
      await eventually(async () => (await eventsOf(kernelConn, heldId)).some((e) => e.type === "delivery.acknowledged"), 30_000)
      await eventually(async () => !(await deployment.openIndexHas(heldId)), 30_000)
    }
    await eventually(deployment.controllerIdle, 30_000)
    for (const heldId of calls) {
      const events = await eventsOf(kernelConn, heldId)
      const acked = events.findIndex((e) => e.type === "delivery.acknowledged")
      expect(events.slice(acked).filter((e) => e.type === "delivery.published")).toEqual([])
      expect(events.filter((e) => e.type === "delivery.stopped")).toEqual([])
      expect((await alice.get(heldId)).held).toMatchObject({ lifecycle: "completed", continuation_delivery: "acknowledged" })
    }
  }, 120_000)
})
