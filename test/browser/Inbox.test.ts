import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { tmpdir } from "node:os"
import { chromium, type Browser, type Page } from "playwright-core"
import { devKeyPair } from "../../runtime/client/DevKeys.js"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { getJson, post, startGatewayHarness, transfer, type GatewayHarness } from "../gateway/GatewayHarness.js"
import { eventually } from "../support/Stream.js"

// The approval inbox in a real Chromium against the gateway on localhost: keys are imported and
// signatures made in the page; the bank is the judge of what ran.
const ChromiumPath = process.env["WK_CHROMIUM"] ?? "/usr/bin/chromium"
let h: GatewayHarness
let browser: Browser

beforeAll(async () => {
  // No silent skip: without Chromium this suite fails and says how to get it.
  if (!existsSync(ChromiumPath)) throw new Error(`Chromium not found at ${ChromiumPath}: apt-get install -y chromium (or set WK_CHROMIUM)`)
  h = await startGatewayHarness()
  browser = await chromium.launch({ executablePath: ChromiumPath, headless: true, args: ["--no-sandbox", "--disable-dev-shm-usage"] })
}, 90_000)
afterAll(async () => {
  await browser?.close()
  await h?.stop()
})

/** Opens the inbox as a witness: imports its dev key through the form (it stays in localStorage). */
const inboxAs = async (principal: string, klass: string): Promise<Page> => {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } })
  const page = await context.newPage()
  page.on("pageerror", (e) => console.error(`page error (${principal}):`, e.message))
  await page.goto(`${h.url}/inbox/`)
  await page.fill("#principal", principal)
  await page.fill("#klass", klass)
  await page.fill("#secret", Buffer.from(devKeyPair(principal).secretKey).toString("base64"))
  await page.click("#save-identity")
  await page.waitForSelector(`#identity-status:has-text("signing as ${principal}")`)
  return page
}

const openHeld = async (page: Page, heldId: string) => {
  await page.click(`#held-list li[data-held-id="${heldId}"]`, { timeout: 15_000 })
  await page.waitForSelector(`#digest-held_id:has-text("${heldId}")`)
}

describe("approval inbox in Chromium", () => {
  it("a witness approves a held transfer in the inbox: the bank shows exactly one effect and the timeline draws the path", async () => {
    const held = await post(`${h.url}/tool-calls`, transfer(4200, "s-browser"))
    expect(held.status).toBe(202)
    const heldId = held.body.held_id as string
    const before = h.bank.effects
    const page = await inboxAs("user:carol", "human")
    await openHeld(page, heldId)
    // What the witness signs is the kernel's view of the call.
    const view = (await getJson(`${h.url}/held/${heldId}`)).body.held
    expect(await page.textContent("#digest-call_digest")).toBe(view.call_digest)
    expect(await page.textContent("#digest-contract_digest")).toBe(view.contract_digest)
    expect(await page.textContent("#digest-generation")).toBe(String(view.generation))
    expect(await page.textContent("#disclosure")).toContain("exact")
    expect(await page.textContent("#presentation")).toContain("4200")
    await page.waitForSelector('#timeline .node[data-type="call.held"]')

    await page.click("#approve")
    await page.waitForSelector('#attest-status[data-disposition="accepted"]')
    // Live: the page follows the call to its delivery without a reload.
    await page.waitForSelector('#timeline .node[data-type="delivery.published"]', { timeout: 20_000 })
    await page.waitForSelector('#state[data-lifecycle="completed"]')
    const drawn = await page.$$eval("#timeline .node", (ns) => ns.map((n) => n.getAttribute("data-type")))
    for (const t of ["call.proposed", "call.adjudicated", "call.held", "attestation.accepted", "readiness.changed", "execution.leased", "effect.dispatched", "effect.recorded", "result.admitted", "delivery.published"]) expect(drawn).toContain(t)
    expect(await page.textContent("#evidence tbody")).toContain("user:carol")
    // The README's picture is refreshed on request (WK_INBOX_SCREENSHOT=1), so ordinary runs leave the tree clean.
    await page.screenshot({ path: process.env["WK_INBOX_SCREENSHOT"] === "1" ? join(repoRoot, "docs/inbox.png") : join(tmpdir(), "wk-inbox.png"), fullPage: true })
    await new Promise((r) => setTimeout(r, 500))
    expect(h.bank.effects).toBe(before + 1)
    await page.context().close()
  }, 60_000)

  it("a rejection by the veto class never reaches the bank", async () => {
    const held = await post(`${h.url}/tool-calls`, transfer(7300, "s-browser"))
    const heldId = held.body.held_id as string
    const before = h.bank.effects
    const page = await inboxAs("compliance:zoe", "compliance")
    await openHeld(page, heldId)
    await page.click("#reject")
    await page.waitForSelector('#attest-status[data-disposition="accepted"]')
    await page.waitForSelector('#state[data-lifecycle="denied"]', { timeout: 20_000 })
    await page.waitForSelector('#timeline .node[data-type="call.denied"]')
    const final = await eventually(async () => {
      const v = (await getJson(`${h.url}/held/${heldId}`)).body.held
      return v.lifecycle === "denied" ? v : null
    })
    expect(final.execution).toBe("none")
    await new Promise((r) => setTimeout(r, 500))
    expect(h.bank.effects).toBe(before)
    // A denied call leaves the inbox.
    await page.waitForFunction((id) => document.querySelector(`#held-list li[data-held-id="${id}"]`) === null, heldId, { timeout: 10_000 })
    await page.context().close()
  }, 60_000)

  it("honours the disclosure preference: a redacted call shows types, not values, and the digests still bind", async () => {
    const held = await post(`${h.url}/tool-calls`, transfer(7777, "s-browser", { disclosure: "redacted" }))
    expect(held.status).toBe(202)
    const heldId = held.body.held_id as string
    const page = await inboxAs("user:dave", "human")
    await openHeld(page, heldId)
    expect(await page.textContent("#disclosure")).toContain("redacted")
    const shown = (await page.textContent("#presentation")) ?? ""
    expect(shown).not.toContain("7777")
    expect(shown).toContain("redacted")
    expect(await page.textContent("#digest-call_digest")).toBe(held.body.call_digest)
    await page.context().close()
  }, 60_000)
})
