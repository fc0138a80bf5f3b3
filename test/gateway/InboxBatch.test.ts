import { describe, expect, it } from "vitest"
import { inboxScript } from "./InboxScript.js"

interface Item { held_id: string; generation: number; call_digest: string; contract_digest: string; presentation_digest: string; summary: string }
type Listed = { held_id: string; generation: number; call_digest: string; contract_digest: string; execution?: string }
const B = inboxScript<{
  itemOf: (h: Listed, pd: string, summary: string) => Item
  changeOf: (item: Item, latest: Listed | undefined, pd: string | undefined) => string | null
  reconcile: (items: ReadonlyArray<Item>, latestOf: (id: string) => { h: Listed; presentationDigest: string } | undefined) => { kept: Array<Item>; dropped: Array<{ item: Item; why: string }> }
  payloadItems: (items: ReadonlyArray<Item>) => Array<Record<string, unknown>>
  noticeOf: (d: { item: Item; why: string }) => string
}>("batch.js", "inboxBatch")

// The batch panel's rules without a browser: a tick binds the call as shown; anything else about
// the call at the click is a change that drops it.
const shown: Listed = { held_id: "h1", generation: 1, call_digest: "c1", contract_digest: "k1", execution: "none" }
const item = B.itemOf(shown, "p1", "Transfer 2,500 EUR from alice to dave")

describe("inbox batch binding", () => {
  it("keeps a call that is exactly as ticked and signs its tick-time binding, nothing else", () => {
    expect(B.changeOf(item, shown, "p1")).toBeNull()
    expect(B.payloadItems([item])).toEqual([{ held_id: "h1", generation: 1, call_digest: "c1", contract_digest: "k1", presentation_digest: "p1" }])
  })

  it("drops a call superseded, re-digested, re-contracted, re-presented, running or gone, each with its reason", () => {
    expect(B.changeOf(item, { ...shown, generation: 2, call_digest: "c2" }, "p2")).toContain("generation 1 → 2")
    expect(B.changeOf(item, { ...shown, call_digest: "c2" }, "p1")).toContain("its call changed")
    expect(B.changeOf(item, { ...shown, contract_digest: "k2" }, "p1")).toContain("witness contract changed")
    expect(B.changeOf(item, shown, "p2")).toContain("what it shows changed")
    expect(B.changeOf(item, { ...shown, execution: "dispatched" }, "p1")).toContain("already running")
    expect(B.changeOf(item, undefined, undefined)).toContain("no longer open")
  })

  it("reconciles a batch: unchanged items stay, changed ones leave with a notice naming what was ticked", () => {
    const other = B.itemOf({ ...shown, held_id: "h2" }, "p9", "Transfer 1,300 EUR from alice to shop")
    const { kept, dropped } = B.reconcile([item, other], (id) => (id === "h1" ? { h: { ...shown, generation: 2 }, presentationDigest: "p1" } : { h: { ...shown, held_id: "h2" }, presentationDigest: "p9" }))
    expect(kept).toEqual([other])
    expect(dropped.map((d) => d.item.held_id)).toEqual(["h1"])
    expect(B.noticeOf(dropped[0]!)).toMatch(/^Removed from the batch: Transfer 2,500 EUR from alice to dave — it changed since you ticked it \(generation 1 → 2\)\. Nothing was signed/)
  })
})
