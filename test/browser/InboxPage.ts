import { existsSync } from "node:fs"
import { chromium, type Browser, type Page } from "playwright-core"
import { devKeyPair } from "../../runtime/client/DevKeys.js"

/** Where the browser tests find Chromium (`apt-get install -y chromium`, or WK_CHROMIUM). */
export const ChromiumPath = process.env["WK_CHROMIUM"] ?? "/usr/bin/chromium"

/** Starts a headless Chromium; without one the suite fails and says how to get it (no silent skip). */
export const launchChromium = (): Promise<Browser> => {
  if (!existsSync(ChromiumPath)) throw new Error(`Chromium not found at ${ChromiumPath}: apt-get install -y chromium (or set WK_CHROMIUM)`)
  return chromium.launch({ executablePath: ChromiumPath, headless: true, args: ["--no-sandbox", "--disable-dev-shm-usage"] })
}

/**
 * Opens the inbox at `url` as a witness: imports its dev key through the form (kept as a
 * non-extractable key in IndexedDB). The inbox confirms in the page, never with a browser dialog,
 * so a dialog is reported and dismissed.
 */
export const inboxAs = async (browser: Browser, url: string, principal: string, klass: string, viewport = { width: 1440, height: 900 }): Promise<Page> => {
  const page = await (await browser.newContext({ viewport })).newPage()
  page.on("pageerror", (e) => console.error(`page error (${principal}):`, e.message))
  page.on("dialog", (d) => {
    console.error(`unexpected dialog (${principal}): ${d.message()}`)
    void d.dismiss()
  })
  await page.goto(`${url}/inbox/`)
  await page.fill("#principal", principal)
  await page.fill("#klass", klass)
  await page.fill("#secret", Buffer.from(devKeyPair(principal).secretKey).toString("base64"))
  await page.click("#save-identity")
  await page.waitForSelector(`#identity-status:has-text("signing as ${principal}")`)
  return page
}

/** Opens a held call from the inbox's list and waits for its detail. */
export const openHeld = async (page: Page, heldId: string) => {
  await page.click(`#held-list li[data-held-id="${heldId}"] a`, { timeout: 15_000 })
  await page.waitForSelector(`#digest-held_id:has-text("${heldId}")`, { state: "attached" })
}
