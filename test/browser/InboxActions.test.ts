import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { randomBytes } from "node:crypto"
import type { Browser, Page } from "playwright-core"
import { getAs, post, signedAs, startGatewayHarness, type GatewayHarness } from "../gateway/GatewayHarness.js"
import { eventually } from "../support/Stream.js"
import { inboxAs as openInbox, launchChromium, openHeld } from "./InboxPage.js"

// The inbox's other answers to a held call, in a real Chromium against the gateway: edit the
// arguments, extend the expiry, approve several calls in one signed batch, approve calls like
// this one in advance (a standing approval). Signatures are made in the page; the bank and the
// kernel's view of each call are the judges.
let h: GatewayHarness
let browser: Browser

beforeAll(async () => {
  browser = await launchChromium()
  h = await startGatewayHarness()
}, 90_000)
afterAll(async () => {
  await browser?.close()
  await h?.stop()
})

let n = 0
const propose = async (to: string, amount: number, preferences?: Record<string, unknown>) => {
  const r = await post(`${h.url}/tool-calls`, signedAs("agent:alice", { op: "propose", session_id: "s-inbox-actions", turn_id: "t1", call_id: `ia${++n}`, tool: "money_transfer", args: { from: "alice", to, amount }, ...(preferences ? { preferences } : {}), nonce: randomBytes(12).toString("hex"), expires_at: new Date(Date.now() + 300_000).toISOString() }))
  return r
}
const heldCall = async (to: string, amount: number, preferences?: Record<string, unknown>) => {
  const r = await propose(to, amount, preferences)
  expect(r.status).toBe(202)
  return String(r.body["held_id"])
}
const view = async (id: string) => (await getAs(h.url, "agent:alice", `/held/${id}`)).body["held"] as Record<string, any>

const inboxAs = (principal: string, klass: string) => openInbox(browser, h.url, principal, klass)

describe("inbox actions in Chromium", () => {
  it("edit: carol changes the amount; the edited call is a new generation that dave's approval runs once with the edited amount", async () => {
    const id = await heldCall("bob", 4_000)
    const page = await inboxAs("user:carol", "human")
    await openHeld(page, id)
    await page.click("#more summary")
    await page.fill("#edit-args", JSON.stringify({ from: "alice", to: "bob", amount: 1_500 }))
    await page.fill("#decision-reason", "cap at 1,500")
    await page.click("#edit-sign")
    await page.waitForSelector('#attest-status[data-disposition="accepted"]')
    expect(await page.textContent("#attest-status")).toContain("now generation 2")
    expect((await view(id)).generation).toBe(2)
    // A bad edit signs nothing.
    await page.fill("#edit-args", "[1, 2]")
    await page.click("#edit-sign")
    await page.waitForSelector('#attest-status[data-disposition="not-signed"]')
    const before = h.bank.effects
    const dave = await inboxAs("user:dave", "human")
    await openHeld(dave, id)
    await dave.waitForSelector('#digest-generation:has-text("2")', { state: "attached" })
    await dave.click("#approve")
    await dave.click("#confirm-sign")
    await dave.waitForSelector('#attest-status[data-disposition="accepted"]')
    await eventually(async () => (await view(id)).lifecycle === "completed")
    expect(h.bank.effects).toBe(before + 1)
    expect((await view(id)).args).toMatchObject({ amount: 1_500 })
    await page.context().close()
    await dave.context().close()
  })

  it("extend: a witness moves a ten-minute hold later by half an hour", async () => {
    const id = await heldCall("bob", 2_200, { expires_in_ms: 600_000 })
    const first = (await view(id)).expires_at as string
    const page = await inboxAs("user:carol", "human")
    await openHeld(page, id)
    await page.click("#more summary")
    await page.selectOption("#extend-by", "1800000")
    await page.click("#extend-sign")
    await page.waitForSelector('#attest-status[data-disposition="accepted"]')
    expect(Date.parse((await view(id)).expires_at)).toBe(Date.parse(first) + 1_800_000)
    await page.context().close()
  })

  it("batch: two calls selected in the list are approved by one signed batch and each runs once", async () => {
    const ids = [await heldCall("shop", 1_100), await heldCall("shop", 1_200)]
    const before = h.bank.effects
    const page = await inboxAs("user:carol", "human")
    for (const id of ids) await page.check(`#held-list li[data-held-id="${id}"] input.pick`, { timeout: 15_000 })
    await page.waitForSelector("#batch-bar:not([hidden])")
    await page.click("#batch-approve")
    // The first click says what will be signed; nothing is sent yet.
    expect(await page.textContent("#batch-approve")).toContain("Sign approval of 2 call(s) as user:carol")
    expect((await view(ids[0]!)).evidence).toEqual([])
    await page.click("#batch-approve")
    await page.waitForSelector('#batch-count[data-result="recorded"]')
    expect(await page.textContent("#batch-count")).toContain("2 accepted")
    await eventually(async () => h.bank.effects === before + 2)
    for (const id of ids) await eventually(async () => (await view(id)).lifecycle === "completed")
    await page.context().close()
  })

  it("standing approval: approve calls like this in advance; the next one like it runs with no one, one unlike it stays held", async () => {
    const id = await heldCall("landlord", 1_800)
    const page = await inboxAs("user:carol", "human")
    await openHeld(page, id)
    await page.click("#more summary")
    expect(await page.textContent("#standing-scope")).toContain("amount ≤ 1800")
    await page.selectOption("#standing-hours", "1")
    await page.fill("#standing-uses", "2")
    await page.click("#standing-sign")
    await page.waitForSelector('#attest-status[data-disposition="recorded"]')
    const before = h.bank.effects
    const like = await propose("landlord", 1_700)
    await eventually(async () => h.bank.effects === before + 1)
    expect((await view(String(like.body["held_id"]))).evidence).toEqual([expect.objectContaining({ witness: "user:carol", standing: expect.stringMatching(/^inbox-/) })])
    const unlike = await propose("landlord", 1_900)
    expect(unlike.status).toBe(202)
    expect((await view(String(unlike.body["held_id"]))).evidence).toEqual([])
    await page.context().close()
  })
})
