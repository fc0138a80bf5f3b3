import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { randomBytes } from "node:crypto"
import type { Browser } from "playwright-core"
import type { Profile } from "../../runtime/schema/Profile.js"
import { gatewayProfile, getAs, post, signedAs, startGatewayHarness, type GatewayHarness } from "../gateway/GatewayHarness.js"
import { eventually } from "../support/Stream.js"
import { inboxAs as openInbox, launchChromium, openHeld } from "./InboxPage.js"

// What a person signs in the inbox is what the person was shown, tried as the agent would attack
// it: the agent supersedes a ticked or opened call with another recipient and the same amount.
// The profile shows transfers in words ("… to dave") and a person's approval releases one.
let h: GatewayHarness
let browser: Browser

const bindingProfile = (): Profile => ({ ...gatewayProfile(), presentation: { money_transfer: "Transfer {amount} EUR from {from} to {to}" } })

beforeAll(async () => {
  browser = await launchChromium()
  h = await startGatewayHarness(bindingProfile())
}, 90_000)
afterAll(async () => {
  await browser?.close()
  await h?.stop()
})

let n = 0
/** agent:alice proposes (or, with the same `callId` while held, supersedes) a transfer. */
const proposeAs = async (callId: string, to: unknown, amount: number, status = 202) => {
  const r = await post(`${h.url}/tool-calls`, signedAs("agent:alice", { op: "propose", session_id: "s-binding", turn_id: "t1", call_id: callId, tool: "money_transfer", args: { from: "alice", to, amount }, nonce: randomBytes(12).toString("hex"), expires_at: new Date(Date.now() + 300_000).toISOString() }))
  expect(r.status, JSON.stringify(r.body)).toBe(status)
  return { heldId: String(r.body["held_id"]), generation: Number(r.body["generation"]) }
}
const view = async (id: string) => (await getAs(h.url, "agent:alice", `/held/${id}`)).body["held"] as Record<string, any>
const entry = (heldId: string) => `#held-list li[data-held-id="${heldId}"]`

describe("the inbox signs what the person saw", () => {
  it("batch: a ticked 2,500 to dave that the agent supersedes with 2,500 to mallory drops out with a notice; the armed batch never signs the new generation", async () => {
    const swapped = `swap${++n}`
    const target = await proposeAs(swapped, "dave", 2_500)
    const other = await proposeAs(`other${++n}`, "shop", 1_300)
    const page = await openInbox(browser, h.url, "user:carol", "human")
    await page.waitForSelector(`${entry(target.heldId)}:has-text("to dave")`, { timeout: 15_000 })
    for (const id of [target.heldId, other.heldId]) await page.check(`${entry(id)} input.pick`, { timeout: 15_000 })
    await page.click("#batch-approve")
    expect(await page.textContent("#batch-approve")).toContain("Sign approval of 2 call(s) as user:carol")

    // The agent swaps the recipient; the amount, the tool and the held_id stay.
    const superseded = await proposeAs(swapped, "mallory", 2_500)
    expect(superseded).toEqual({ heldId: target.heldId, generation: 2 })
    // The list has drawn the new generation before the person clicks again.
    await page.waitForSelector(`${entry(target.heldId)}:has-text("to mallory")`, { timeout: 15_000 })
    const before = h.bank.effects
    await page.click("#batch-approve")

    // The superseded call left the batch, said so, and the batch was disarmed: nothing signed yet.
    await page.waitForSelector(`#batch-notice:not([hidden]) li[data-held-id="${target.heldId}"]`)
    const notice = (await page.textContent("#batch-notice")) ?? ""
    expect(notice).toContain("to dave")
    expect(notice).toContain("generation 1 → 2")
    expect(await page.isChecked(`${entry(target.heldId)} input.pick`)).toBe(false)
    expect(await page.textContent("#batch-approve")).toContain("Sign approval of 1 call(s)")
    expect((await view(target.heldId)).evidence).toEqual([])
    expect((await view(other.heldId)).evidence).toEqual([])

    // Signing now signs the call still as ticked, and only it.
    await page.click("#batch-approve")
    await page.waitForSelector('#batch-count[data-result="recorded"]')
    expect(await page.textContent("#batch-count")).toContain("1 accepted, 0 not")
    await eventually(async () => (await view(other.heldId)).lifecycle === "completed")
    expect(h.bank.effects).toBe(before + 1)
    expect(h.bank.balance("shop")).toBe(10_000 + 1_300)
    const swappedCall = await view(target.heldId)
    expect(swappedCall).toMatchObject({ generation: 2, lifecycle: "open", execution: "none", args: { to: "mallory" } })
    expect(swappedCall.evidence).toEqual([])
    expect(h.bank.balance("mallory")).toBe(10_000)
    await page.context().close()
  }, 90_000)

  it("batch: a call superseded after the tick but before the list is re-read is signed as ticked, so the kernel refuses it as stale and nothing runs", async () => {
    const swapped = `swap${++n}`
    const target = await proposeAs(swapped, "dave", 2_600)
    const page = await openInbox(browser, h.url, "user:carol", "human")
    await page.check(`${entry(target.heldId)} input.pick`, { timeout: 15_000 })
    // The page sees no newer listing from here on.
    await page.route("**/held", (route) => route.abort())
    await page.click("#batch-approve")
    await proposeAs(swapped, "mallory", 2_600)
    const before = h.bank.effects
    await page.click("#batch-approve")
    await page.waitForSelector('#batch-count[data-result="recorded"]')
    expect(await page.textContent("#batch-count")).toContain("0 accepted, 1 not")
    const v = await view(target.heldId)
    expect(v).toMatchObject({ generation: 2, lifecycle: "open", execution: "none" })
    // The kernel recorded the signature as bound to generation 1: refused, counting for nothing.
    expect(v.evidence).toEqual([expect.objectContaining({ witness: "user:carol", status: "rejected", reason: expect.stringContaining("bound to generation 1") })])
    expect(h.bank.effects).toBe(before)
    await page.context().close()
  }, 90_000)

  it("one call: a confirmation open while the agent supersedes the call is withdrawn unsigned, and the pane says the call changed", async () => {
    const swapped = `swap${++n}`
    const target = await proposeAs(swapped, "dave", 2_700)
    const page = await openInbox(browser, h.url, "user:carol", "human")
    await openHeld(page, target.heldId)
    await page.click("#approve")
    await page.waitForSelector("#confirm:not([hidden])")
    expect(await page.textContent("#confirm")).toContain("to dave")
    await proposeAs(swapped, "mallory", 2_700)
    await page.waitForSelector('#attest-status[data-disposition="superseded"]', { timeout: 15_000 })
    expect(await page.isHidden("#confirm")).toBe(true)
    expect(await page.textContent("#changed-notice")).toContain("generation 1 → 2")
    expect(await page.textContent("#detail-title")).toContain("to mallory")
    expect((await view(target.heldId)).evidence).toEqual([])
    await page.context().close()
  }, 90_000)

  it("one call: an edit typed while the agent supersedes the call is not signed against the new call; the box then holds the new call's arguments", async () => {
    const swapped = `swap${++n}`
    const target = await proposeAs(swapped, "dave", 2_800)
    const page = await openInbox(browser, h.url, "user:carol", "human")
    await openHeld(page, target.heldId)
    await page.click("#more summary")
    await page.fill("#edit-args", JSON.stringify({ from: "alice", to: "dave", amount: 1_000 }))
    await proposeAs(swapped, "mallory", 2_800)
    await page.waitForSelector('#changed-notice:not([hidden])', { timeout: 15_000 })
    // What the witness typed stays on screen; signing it now would edit a call it never saw.
    expect(JSON.parse((await page.inputValue("#edit-args")) ?? "{}")).toEqual({ from: "alice", to: "dave", amount: 1_000 })
    await page.click("#edit-sign")
    await page.waitForSelector('#attest-status[data-disposition="superseded"]')
    expect(await page.textContent("#attest-status")).toContain("generation 1 → 2")
    expect(await page.inputValue("#edit-args")).toContain("mallory")
    expect(await view(target.heldId)).toMatchObject({ generation: 2, args: { to: "mallory", amount: 2_800 } })
    await page.context().close()
  }, 90_000)

  it("standing: 'approve calls like this' for a transfer to a recipient object bounds every argument, the object whole; a transfer to another recipient object is not approved", async () => {
    const dave = { name: "dave", iban: "DE02 1203 0000 0000 2020 51" }
    const shown = await proposeAs(`obj${++n}`, dave, 1_900)
    const page = await openInbox(browser, h.url, "user:erin", "human")
    await openHeld(page, shown.heldId)
    await page.click("#more summary")
    await page.waitForSelector('#standing-scope[data-offered="true"]')
    // The scope the person reads names every argument and its bound.
    expect(await page.textContent("#standing-scope")).toBe('covers money_transfer by agent:alice with from = "alice", to = {"iban":"DE02 1203 0000 0000 2020 51","name":"dave"}, amount ≤ 1900')
    await page.selectOption("#standing-hours", "1")
    await page.fill("#standing-uses", "3")
    await page.click("#standing-sign")
    await page.waitForSelector('#attest-status[data-disposition="recorded"]')

    const toMallory = await proposeAs(`obj${++n}`, { name: "mallory", iban: "GB33 BUKB 2020 1555 5555 55" }, 1_800)
    const sameNameOtherIban = await proposeAs(`obj${++n}`, { ...dave, iban: "GB33 BUKB 2020 1555 5555 55" }, 1_800)
    for (const c of [toMallory, sameNameOtherIban]) expect((await view(c.heldId)).evidence).toEqual([])
    // The same recipient is inside: erin's standing approval releases it at once (the bank
    // refuses an object payee, so it ends as a tool failure; the approval is what is judged here).
    const like = await proposeAs(`obj${++n}`, { iban: dave.iban, name: dave.name }, 1_800, 200)
    await eventually(async () => (await view(like.heldId)).evidence.some((e: { standing?: string }) => e.standing?.startsWith("inbox-")))
    await page.context().close()
  }, 90_000)

  it("standing: not offered, with the reason, for a redacted call", async () => {
    const r = await post(`${h.url}/tool-calls`, signedAs("agent:alice", { op: "propose", session_id: "s-binding", turn_id: "t1", call_id: `red${++n}`, tool: "money_transfer", args: { from: "alice", to: "dave", amount: 1_700 }, preferences: { disclosure: "redacted" }, nonce: randomBytes(12).toString("hex"), expires_at: new Date(Date.now() + 300_000).toISOString() }))
    const page = await openInbox(browser, h.url, "user:erin", "human")
    await openHeld(page, String(r.body["held_id"]))
    await page.click("#more summary")
    await page.waitForSelector('#standing-scope[data-offered="false"]')
    expect(await page.textContent("#standing-scope")).toContain("not offered: the arguments are redacted")
    expect(await page.isDisabled("#standing-sign")).toBe(true)
    await page.context().close()
  }, 90_000)
})
