import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { tmpdir } from "node:os"
import { chromium, type Browser, type Page } from "playwright-core"
import { devKeyPair } from "../../runtime/client/DevKeys.js"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { getAs, post, startGatewayHarness, transfer, type GatewayHarness } from "../gateway/GatewayHarness.js"
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

/** What each page was asked to confirm before signing; `refuse` makes the next confirmation a "no". */
const confirmations = new Map<Page, Array<string>>()
const refuseNext = new Set<Page>()

/** Opens the inbox as a witness: imports its dev key through the form (kept as a non-extractable key in IndexedDB). */
const inboxAs = async (principal: string, klass: string): Promise<Page> => {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } })
  const page = await context.newPage()
  page.on("pageerror", (e) => console.error(`page error (${principal}):`, e.message))
  confirmations.set(page, [])
  page.on("dialog", (d) => {
    confirmations.get(page)!.push(d.message())
    void (refuseNext.delete(page) ? d.dismiss() : d.accept())
  })
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
    const view = (await getAs(h.url, "user:carol", `/held/${heldId}`)).body.held
    expect(await page.textContent("#digest-call_digest")).toBe(view.call_digest)
    expect(await page.textContent("#digest-contract_digest")).toBe(view.contract_digest)
    expect(await page.textContent("#digest-generation")).toBe(String(view.generation))
    expect(await page.textContent("#disclosure")).toContain("exact")
    expect(await page.textContent("#presentation")).toContain("4200")
    await page.waitForSelector('#timeline .node[data-type="call.held"]')

    await page.click("#approve")
    await page.waitForSelector('#attest-status[data-disposition="accepted"]')
    // The confirmation restated what was signed.
    const asked = confirmations.get(page)!.at(-1) ?? ""
    for (const part of ['"approve"', "user:carol", heldId, view.call_digest, view.contract_digest, `generation ${view.generation}`]) expect(asked).toContain(part)
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
      const v = (await getAs(h.url, "compliance:zoe", `/held/${heldId}`)).body.held
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

  it("declining the confirmation signs nothing", async () => {
    const held = await post(`${h.url}/tool-calls`, transfer(4400, "s-browser"))
    const heldId = held.body.held_id as string
    const page = await inboxAs("user:erin", "human")
    await openHeld(page, heldId)
    refuseNext.add(page)
    await page.click("#approve")
    await page.waitForSelector('#attest-status:has-text("not signed")')
    expect(confirmations.get(page)!.at(-1)).toContain(heldId)
    expect((await getAs(h.url, "user:erin", `/held/${heldId}`)).body.held.evidence).toEqual([])
    await page.context().close()
  }, 60_000)

  it("the inbox cannot be framed, runs only its own scripts, and keeps no secret where page script can read it", async () => {
    const r = await fetch(`${h.url}/inbox/`)
    const csp = r.headers.get("content-security-policy") ?? ""
    expect(csp).toContain("frame-ancestors 'none'")
    expect(csp).toContain("default-src 'none'")
    expect(csp).toContain("script-src 'self'")
    expect(r.headers.get("x-frame-options")).toBe("DENY")
    await r.body?.cancel()

    const page = await inboxAs("user:carol", "human")
    const secret = Buffer.from(devKeyPair("user:carol").secretKey).toString("base64")
    const seed = Buffer.from(devKeyPair("user:carol").secretKey.subarray(0, 32)).toString("base64")
    const stored = await page.evaluate(async () => {
      const all: Record<string, string> = {}
      for (let i = 0; i < localStorage.length; i++) all[localStorage.key(i)!] = localStorage.getItem(localStorage.key(i)!)!
      const identity = await (window as any).inboxKeys.load()
      const exported = await crypto.subtle.exportKey("jwk", identity.privateKey).then(() => "exported", (e: Error) => e.name)
      return { local: JSON.stringify(all), extractable: identity.privateKey.extractable, type: identity.privateKey.type, exported, publicKey: identity.publicKey }
    })
    expect(stored.local).not.toContain(secret)
    expect(stored.local).not.toContain(seed)
    expect(stored).toMatchObject({ extractable: false, type: "private", exported: "InvalidAccessError", publicKey: Buffer.from(devKeyPair("user:carol").publicKey).toString("base64") })

    // Another origin framing the inbox gets nothing rendered.
    const attacker = await page.context().newPage()
    await attacker.setContent(`<iframe id="f" src="${h.url}/inbox/" width="800" height="600"></iframe>`)
    await attacker.waitForTimeout(1000)
    const framed = attacker.frames().find((f) => f !== attacker.mainFrame())
    const framedText = framed === undefined ? "" : await framed.evaluate(() => document.body?.innerText ?? "").catch(() => "")
    expect(framedText).not.toContain("approval inbox")
    await page.context().close()
  }, 60_000)

  it("a key generated in the browser is non-extractable and its public key is shown for registration", async () => {
    const context = await browser.newContext()
    const page = await context.newPage()
    await page.goto(`${h.url}/inbox/`)
    await page.fill("#principal", "user:new")
    await page.fill("#klass", "human")
    await page.click("#generate-key")
    await page.waitForSelector('#identity-status:has-text("signing as user:new")')
    const shown = (await page.textContent("#public-key")) ?? ""
    expect(Buffer.from(shown, "base64").length).toBe(32)
    expect(await page.evaluate(async () => (await (window as any).inboxKeys.load()).privateKey.extractable)).toBe(false)
    await context.close()
  }, 60_000)
})
