import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { Browser } from "playwright-core"
import { devKeyPair } from "../../runtime/client/DevKeys.js"
import { getAs, post, startGatewayHarness, transfer, type GatewayHarness } from "../gateway/GatewayHarness.js"
import { eventually } from "../support/Stream.js"
import { inboxAs as openInbox, launchChromium, openHeld } from "./InboxPage.js"

// What the inbox shows after each decision, and what a person meets before and around one: the
// first-use panel, key errors in words, Escape and focus, the badge's colour by outcome. A real
// Chromium against the gateway; the profile is the test one, where a transfer over 1,000 needs
// one person.
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

const held = async (amount: number) => {
  const r = await post(`${h.url}/tool-calls`, transfer(amount, "s-decisions"))
  expect(r.status).toBe(202)
  return r.body["held_id"] as string
}
const inboxAs = (principal: string, klass: string, viewport?: { width: number; height: number }) => openInbox(browser, h.url, principal, klass, viewport)
const decide = async (page: Awaited<ReturnType<typeof inboxAs>>, decision: "approve" | "reject") => {
  await page.click(`#${decision}`)
  await page.waitForSelector("#confirm:not([hidden])")
  await page.click("#confirm-sign")
  await page.waitForSelector('#attest-status[data-disposition="accepted"]')
}

describe("the inbox after a decision, in Chromium", () => {
  it("carol rejects a call that needs one person: the page names her reject, says what is still missing, and offers her nothing more", async () => {
    const id = await held(2_100)
    const page = await inboxAs("user:carol", "human")
    await openHeld(page, id)
    expect(await page.textContent("#state")).toBe("open · still needs a person")
    expect(await page.textContent("#you")).toBe("You may approve or reject it.")
    await decide(page, "reject")
    await page.waitForSelector('#you[data-my="reject"]')
    const line = (await page.textContent("#state")) ?? ""
    expect(line).toBe("open · rejected by user:carol · still needs a person")
    expect(line).not.toContain("waiting for witnesses")
    expect(await page.getAttribute("#state", "data-kind")).toBe("rejected")
    expect(await page.isHidden("#approve")).toBe(true)
    expect(await page.isHidden("#reject")).toBe(true)
    expect(await page.textContent("#you")).toContain("You rejected it")
    // The kernel agrees: carol's reject stands, the call waits for another person.
    const v = (await getAs(h.url, "user:carol", `/held/${id}`)).body.held
    expect(v.evidence.map((e: any) => [e.witness, e.decision])).toEqual([["user:carol", "reject"]])
    await page.context().close()
  }, 90_000)

  it("carol approves a call that needs one person: the page follows it to completed, with nothing left to decide", async () => {
    const id = await held(2_200)
    const page = await inboxAs("user:carol", "human")
    await openHeld(page, id)
    await decide(page, "approve")
    await page.waitForSelector('#state[data-kind="completed"]', { timeout: 20_000 })
    expect(await page.textContent("#state")).toBe("completed")
    expect(await page.textContent("#you")).toContain("You approved it")
    expect(await page.isHidden("#decide")).toBe(true)
    // Green is for a call that ran and succeeded.
    expect(await page.$eval("#state", (e) => getComputedStyle(e).backgroundColor)).toBe("rgb(22, 163, 74)")
    await page.context().close()
  }, 90_000)

  it("a failed call's badge is red, not green", async () => {
    const id = await held(90_000)
    const page = await inboxAs("user:dave", "human")
    await openHeld(page, id)
    await decide(page, "approve")
    await page.waitForSelector('#state[data-kind="failed"]', { timeout: 20_000 })
    expect(await page.$eval("#state", (e) => getComputedStyle(e).backgroundColor)).toBe("rgb(220, 38, 38)")
    await page.context().close()
  }, 90_000)

  it("Escape closes the confirmation unsigned and gives focus back to the button that opened it; the opened call takes focus", async () => {
    const id = await held(2_300)
    const page = await inboxAs("user:erin", "human")
    await openHeld(page, id)
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("detail-title")
    // Keyboard order through the decision: reason, Approve, Reject.
    await page.focus("#decision-reason")
    await page.keyboard.press("Tab")
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("approve")
    await page.keyboard.press("Tab")
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("reject")
    await page.keyboard.press("Enter")
    await page.waitForSelector("#confirm:not([hidden])")
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("confirm-sign")
    await page.keyboard.press("Escape")
    await page.waitForSelector("#confirm", { state: "hidden" })
    expect(await page.textContent("#attest-status")).toBe("reject: not signed")
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("reject")
    expect((await getAs(h.url, "user:erin", `/held/${id}`)).body.held.evidence).toEqual([])
    await page.context().close()
  }, 90_000)
})

describe("first use and key errors, in Chromium", () => {
  const fresh = async () => {
    const page = await (await browser.newContext({ viewport: { width: 1440, height: 900 } })).newPage()
    const errors: Array<string> = []
    page.on("pageerror", (e) => errors.push(e.message))
    await page.goto(`${h.url}/inbox/`)
    return { page, errors }
  }

  it("a browser with no key sees how to get and load one", async () => {
    const { page, errors } = await fresh()
    await page.waitForSelector("#first-use:not([hidden])")
    const text = (await page.textContent("#first-use")) ?? ""
    expect(text).toContain("wk dev-key user:carol")
    expect(text).toContain("secret key")
    expect(errors).toEqual([])
    await page.context().close()
  }, 60_000)

  it("a garbage key and a key the kernel does not know for the principal are refused in words, in an alert, and not kept", async () => {
    const { page, errors } = await fresh()
    await page.fill("#principal", "user:carol")
    await page.fill("#klass", "human")
    await page.fill("#secret", "this is not a key")
    await page.click("#save-identity")
    await page.waitForSelector("#key-error:not([hidden])")
    expect(await page.textContent("#key-error")).toMatch(/^Key not loaded: that is not a key .*wk dev-key <principal>/)
    expect(await page.getAttribute("#key-error", "role")).toBe("alert")
    // Dave's key, given as carol's: well formed, but not carol's.
    await page.fill("#secret", Buffer.from(devKeyPair("user:dave").secretKey).toString("base64"))
    await page.click("#save-identity")
    await page.waitForSelector('#key-error:has-text("does not know this key for user:carol")')
    expect(await page.evaluate(async () => (window as any).inboxKeys.load())).toBeNull()
    expect(await page.isVisible("#first-use")).toBe(true)
    // Readable, not faint: dark text on a light red ground.
    expect(await page.$eval("#key-error", (e) => getComputedStyle(e).color)).toBe("rgb(127, 29, 29)")
    // Carol's own key loads, and the first-use panel goes.
    await page.fill("#secret", Buffer.from(devKeyPair("user:carol").secretKey).toString("base64"))
    await page.click("#save-identity")
    await page.waitForSelector('#identity-status:has-text("signing as user:carol")')
    await page.waitForSelector("#first-use", { state: "hidden" })
    expect(await page.isHidden("#key-error")).toBe(true)
    expect(errors).toEqual([])
    await page.context().close()
  }, 60_000)
})

describe("the timeline at 1,440 px", () => {
  it("a completed call's whole path fits its card", async () => {
    const id = await held(2_400)
    const page = await inboxAs("user:carol", "human", { width: 1440, height: 1000 })
    await openHeld(page, id)
    await decide(page, "approve")
    await page.waitForSelector('#timeline .node[data-type="delivery.published"]', { timeout: 20_000 })
    await eventually(async () => ((await page.$$("#timeline .node")).length >= 10 ? true : null))
    const fit = await page.$eval("#timeline", (t) => ({ card: t.clientWidth, drawn: t.querySelector("svg")!.getBoundingClientRect().width, scroll: t.scrollWidth }))
    expect(fit.drawn).toBeLessThanOrEqual(fit.card)
    expect(fit.scroll).toBeLessThanOrEqual(fit.card)
    await page.context().close()
  }, 90_000)
})
