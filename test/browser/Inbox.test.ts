import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { join } from "node:path"
import { tmpdir } from "node:os"
import { randomBytes } from "node:crypto"
import type { Browser, Page } from "playwright-core"
import { jetstream } from "@nats-io/jetstream"
import { devKeyPair } from "../../runtime/client/DevKeys.js"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { Streams, Subjects } from "../../runtime/schema/Subjects.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { gatewayProfile, getAs, post, signedAs, startGatewayHarness, transfer, type GatewayHarness } from "../gateway/GatewayHarness.js"
import { eventually } from "../support/Stream.js"
import { inboxAs as openInbox, launchChromium, openHeld } from "./InboxPage.js"

// The approval inbox in a real Chromium against the gateway on localhost: keys are imported and
// signatures made in the page; the bank is the judge of what ran. The profile is the README's:
// a transfer over 1,000 needs (a person and the fraud service) or break-glass, compliance vetoes.
/** WK_SCREENSHOTS=1 rewrites docs/inbox-390.png and docs/inbox-1440.png; otherwise they go to a temp dir. */
const ScreenshotDir = process.env["WK_SCREENSHOTS"] === "1" ? join(repoRoot, "docs") : tmpdir()
let h: GatewayHarness
let browser: Browser

const inboxProfile = (): Profile => {
  const base = gatewayProfile()
  return {
    ...base,
    presentation: { money_transfer: "Transfer {amount} EUR from {from} to {to}" },
    rules: {
      money_transfer: {
        ...base.rules!["money_transfer"]!,
        contract: { rule: { any: [{ all: [{ class: "human" }, { class: "fraud" }] }, { class: "breakglass" }] }, veto: ["compliance"] }
      }
    }
  }
}

beforeAll(async () => {
  browser = await launchChromium()
  h = await startGatewayHarness(inboxProfile())
}, 90_000)
afterAll(async () => {
  await browser?.close()
  await h?.stop()
})

const inboxAs = (principal: string, klass: string, viewport?: { width: number; height: number }) => openInbox(browser, h.url, principal, klass, viewport)

/** Asks to sign `decision` (with `reason`), checks nothing was sent yet, and returns what the confirmation restates. */
const askToSign = async (page: Page, decision: "approve" | "reject", reason?: string): Promise<string> => {
  if (reason !== undefined) await page.fill("#decision-reason", reason)
  await page.click(`#${decision}`)
  await page.waitForSelector("#confirm:not([hidden])")
  return (await page.textContent("#confirm")) ?? ""
}

/** An approval by a witness signed outside the browser (the fraud service answers by API). */
const approveByApi = async (principal: string, klass: string, heldId: string) => {
  const v = (await getAs(h.url, principal, `/held/${heldId}`)).body.held
  const now = Date.now()
  const env = signedAs(principal, {
    op: "attest", class: klass, held_id: heldId, generation: v.generation, call_digest: v.call_digest, contract_digest: v.contract_digest,
    decision: "approve", issued_at: new Date(now).toISOString(), expires_at: new Date(now + 600_000).toISOString(), nonce: randomBytes(12).toString("hex")
  })
  const r = await post(`${h.url}/held/${heldId}/attestations`, env)
  expect(r.body.disposition).toBe("accepted")
}

/** Whether the page is wider than its viewport (a horizontal scrollbar). */
const overflows = (page: Page) => page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth)

describe("approval inbox in Chromium", () => {
  it("a witness reads the call in words, sees the rule's progress, confirms what it signs, and the call runs once the fraud service agrees", async () => {
    const held = await post(`${h.url}/tool-calls`, transfer(4200, "s-browser"))
    expect(held.status).toBe(202)
    const heldId = held.body.held_id as string
    const before = h.bank.effects
    const page = await inboxAs("user:carol", "human")
    // The list entry says what the call does, its amount and its age.
    const entry = page.locator(`#held-list li[data-held-id="${heldId}"]`)
    await entry.waitFor({ timeout: 15_000 })
    expect(await entry.textContent()).toContain("Transfer 4,200 EUR from alice to bob")
    expect(await entry.locator(".amount").textContent()).toBe("4,200")
    expect(await entry.textContent()).toMatch(/held \d+ s ago/)
    // The header shows the kernels' health, read as this witness.
    await page.waitForSelector('#kernel-health[data-state="up"]')
    expect(await page.textContent("#kernel-health")).toMatch(/^kernels: 1 up \(\S+\) · lag \d+ · last recovery /)
    await openHeld(page, heldId)
    expect(page.url()).toContain(`#/held/${heldId}`)
    expect(await page.textContent("#detail-title")).toBe("Transfer 4,200 EUR from alice to bob")
    // Why it was held, the rule in words, and the expiry.
    expect(await page.textContent("#reasons")).toMatch(/4200|1000/)
    const rule = (await page.textContent("#rule-progress")) ?? ""
    expect(rule).toContain("needs: either")
    expect(rule).toContain("a person …")
    expect(rule).toContain("the fraud service …")
    expect(rule).toContain("a break-glass operator …")
    expect(await page.textContent("#expiry")).toMatch(/expires in \d+ min/)
    // What the witness signs is the kernel's view of the call.
    const view = (await getAs(h.url, "user:carol", `/held/${heldId}`)).body.held
    expect(await page.textContent("#digest-call_digest")).toBe(view.call_digest)
    expect(await page.textContent("#digest-contract_digest")).toBe(view.contract_digest)
    expect(await page.textContent("#digest-generation")).toBe(String(view.generation))
    expect(await page.textContent("#disclosure")).toContain("exact")
    expect(await page.textContent("#presentation")).toContain("4200")

    // One click signs nothing: the confirmation restates the statement first.
    const asked = await askToSign(page, "approve")
    expect((await getAs(h.url, "user:carol", `/held/${heldId}`)).body.held.evidence).toEqual([])
    for (const part of ['"approve"', "user:carol", "Transfer 4,200 EUR from alice to bob", heldId, view.call_digest, view.contract_digest, `generation ${view.generation}`]) expect(asked).toContain(part)
    await page.click("#confirm-sign")
    await page.waitForSelector('#attest-status[data-disposition="accepted"]')
    // The person's place is filled; the fraud service's is not.
    await page.waitForSelector('#rule-progress .place[data-met="true"]:has-text("a person ✓ (user:carol)")')
    expect(await page.textContent("#rule-progress")).toContain("the fraud service …")
    expect(await page.textContent("#state")).toContain("open")

    await approveByApi("svc:fraud", "fraud", heldId)
    // Live: the page follows the call to its delivery without a reload.
    await page.waitForSelector('#timeline .node[data-type="delivery.published"]', { timeout: 20_000 })
    await page.waitForSelector('#state[data-lifecycle="completed"]')
    await page.waitForSelector('#outcome[data-outcome="completed"]')
    expect(await page.textContent("#outcome")).toContain("4200")
    const drawn = await page.$$eval("#timeline .node", (ns) => ns.map((n) => n.getAttribute("data-type")))
    for (const t of ["call.proposed", "call.adjudicated", "call.held", "attestation.accepted", "readiness.changed", "execution.leased", "effect.dispatched", "effect.recorded", "result.admitted", "delivery.published"]) expect(drawn).toContain(t)
    expect(await page.textContent("#evidence tbody")).toContain("user:carol")
    await new Promise((r) => setTimeout(r, 500))
    expect(h.bank.effects).toBe(before + 1)
    // The ended call stays findable under the "ended" filter.
    await page.selectOption("#filter-state", "ended")
    await page.waitForSelector(`#held-list li[data-held-id="${heldId}"] .chip.completed`)
    await page.context().close()
  }, 90_000)

  it("a reject with a reason: the confirmation restates it, the veto denies the call, and the reason reaches the agent's delivery", async () => {
    const session = `s-reject-${randomBytes(4).toString("hex")}`
    const held = await post(`${h.url}/tool-calls`, transfer(7300, session))
    const heldId = held.body.held_id as string
    const before = h.bank.effects
    const page = await inboxAs("compliance:zoe", "compliance")
    await openHeld(page, heldId)
    const reason = "beneficiary bob is not on the approved list"
    const asked = await askToSign(page, "reject", reason)
    expect(asked).toContain('"reject"')
    expect(asked).toContain(reason)
    await page.click("#confirm-sign")
    await page.waitForSelector('#attest-status[data-disposition="accepted"]')
    await page.waitForSelector('#state[data-lifecycle="denied"]', { timeout: 20_000 })
    await page.waitForSelector('#outcome[data-outcome="denied"]')
    expect(await page.textContent("#outcome")).toContain(reason)
    await page.waitForSelector('#timeline .node[data-type="call.denied"]')
    // The agent's delivery carries the witness's words.
    const consumer = await jetstream(h.kernelConn).consumers.get(Streams.sessions, { filter_subjects: Subjects.sessionResults(session) })
    const delivered = await consumer.next({ expires: 20_000 })
    expect(delivered).not.toBeNull()
    const body = delivered!.json<{ held_id: string; outcome: string; reasons: Array<{ by: string; reason: string }> }>()
    expect(body).toMatchObject({ held_id: heldId, outcome: "denied" })
    expect(body.reasons.map((r) => r.reason).join(" ")).toContain(reason)
    const final = await eventually(async () => {
      const v = (await getAs(h.url, "compliance:zoe", `/held/${heldId}`)).body.held
      return v.lifecycle === "denied" ? v : null
    })
    expect(final.execution).toBe("none")
    await new Promise((r) => setTimeout(r, 500))
    expect(h.bank.effects).toBe(before)
    // A denied call leaves the open list.
    await page.waitForFunction((id) => document.querySelector(`#held-list li[data-held-id="${id}"]`) === null, heldId, { timeout: 10_000 })
    await page.context().close()
  }, 90_000)

  it("a transfer the bank refuses is shown as a failure with the bank's reason, not as completed", async () => {
    const held = await post(`${h.url}/tool-calls`, transfer(60_000, "s-browser"))
    expect(held.status).toBe(202)
    const heldId = held.body.held_id as string
    const page = await inboxAs("user:dave", "human")
    await openHeld(page, heldId)
    await askToSign(page, "approve")
    await page.click("#confirm-sign")
    await page.waitForSelector('#attest-status[data-disposition="accepted"]')
    await approveByApi("svc:fraud", "fraud", heldId)
    await page.waitForSelector('#outcome[data-outcome="failed"]', { timeout: 20_000 })
    expect(await page.textContent("#outcome")).toContain("insufficient funds")
    expect(await page.textContent("#state")).toBe("failed")
    await page.context().close()
  }, 90_000)

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
    expect(await page.textContent("#detail-title")).toBe("money_transfer (arguments redacted)")
    expect(await page.textContent(`#held-list li[data-held-id="${heldId}"]`)).not.toContain("7,777")
    expect(await page.textContent("#digest-call_digest")).toBe(held.body.call_digest)
    await page.context().close()
  }, 60_000)

  it("going back from the confirmation signs nothing", async () => {
    const held = await post(`${h.url}/tool-calls`, transfer(4400, "s-browser"))
    const heldId = held.body.held_id as string
    const page = await inboxAs("user:erin", "human")
    await openHeld(page, heldId)
    expect(await askToSign(page, "approve")).toContain(heldId)
    await page.click("#confirm-cancel")
    await page.waitForSelector('#attest-status:has-text("not signed")')
    expect(await page.isHidden("#confirm")).toBe(true)
    expect((await getAs(h.url, "user:erin", `/held/${heldId}`)).body.held.evidence).toEqual([])
    await page.context().close()
  }, 60_000)

  it("a deep link opens its call on a fresh load; the filters narrow the list by tool and state", async () => {
    const held = await post(`${h.url}/tool-calls`, transfer(3100, "s-browser"))
    const heldId = held.body.held_id as string
    const page = await inboxAs("user:dave", "human")
    await page.goto(`${h.url}/inbox/#/held/${heldId}`)
    await page.reload()
    await page.waitForSelector(`#digest-held_id:has-text("${heldId}")`, { state: "attached" })
    expect(await page.textContent("#detail-title")).toBe("Transfer 3,100 EUR from alice to bob")
    // Back to the list, then filters.
    await page.goto(`${h.url}/inbox/#/`)
    await page.waitForSelector("#detail-pane", { state: "hidden" })
    await page.waitForSelector(`#filter-tool option[value="money_transfer"]`, { state: "attached" })
    await page.selectOption("#filter-tool", "money_transfer")
    expect(await page.locator(`#held-list li[data-held-id="${heldId}"]`).count()).toBe(1)
    await page.selectOption("#filter-tool", "")
    await page.selectOption("#filter-state", "ended")
    await page.waitForFunction((id) => document.querySelector(`#held-list li[data-held-id="${id}"]`) === null, heldId)
    await page.context().close()
  }, 60_000)

  it("fits a 390 px phone without sideways scrolling, list and call; screenshots at 390 and 1,440 px", async () => {
    // A call a person approved and the fraud service has yet to: the rule's progress shows.
    const held = await post(`${h.url}/tool-calls`, transfer(2500, "s-browser"))
    const heldId = held.body.held_id as string
    await approveByApi("user:carol", "human", heldId)
    await post(`${h.url}/tool-calls`, transfer(12_000, "s-browser"))

    const wide = await inboxAs("user:dave", "human", { width: 1440, height: 1000 })
    await wide.evaluate(() => ((document.getElementById("identity-box") as HTMLDetailsElement).open = false))
    await openHeld(wide, heldId)
    await wide.waitForSelector('#rule-progress .place[data-met="true"]:has-text("a person ✓ (user:carol)")')
    await wide.fill("#decision-reason", "matches invoice 2026-118")
    expect(await overflows(wide)).toBe(false)
    await wide.screenshot({ path: join(ScreenshotDir, "inbox-1440.png"), fullPage: true })
    await wide.context().close()

    const phone = await inboxAs("user:dave", "human", { width: 390, height: 844 })
    await phone.evaluate(() => ((document.getElementById("identity-box") as HTMLDetailsElement).open = false))
    await phone.waitForSelector(`#held-list li[data-held-id="${heldId}"]`)
    expect(await overflows(phone)).toBe(false)
    await openHeld(phone, heldId)
    await phone.waitForSelector("#list-pane", { state: "hidden" })
    await phone.waitForSelector('#timeline .node[data-type="call.held"]')
    expect(await overflows(phone)).toBe(false)
    await askToSign(phone, "approve", "matches invoice 2026-118")
    expect(await overflows(phone)).toBe(false)
    // The phone picture shows the confirmation: what a tap on "Sign" would sign.
    await phone.screenshot({ path: join(ScreenshotDir, "inbox-390.png"), fullPage: true })
    await phone.click("#confirm-cancel")
    await phone.context().close()
  }, 90_000)

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
