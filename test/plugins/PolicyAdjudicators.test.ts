// The adjudicator plugins, compiled wasm through the pipeline: transfer-limit, write-scope, data-egress.
import { afterAll, describe, expect, it } from "vitest"
import fc from "fast-check"
import type { PluginPin } from "../../runtime/schema/PluginPin.js"
import { pinOf } from "./support.js"
import { baseAllow, pipelineRuntime } from "./policySupport.js"

// `spent_today` for alice, per suite: the counter host function reads this.
const counters: Record<string, Record<string, number>> = { spent_today: { alice: 0 } }
const rt = pipelineRuntime({ counters })
afterAll(() => rt.dispose())
const spentToday = (n: number) => (counters["spent_today"]!["alice"] = n)

const limits = { witness_above: 1000, deny_above: 100_000, daily_witness_above: 5000, daily_deny_above: 200_000 }
const transferLimit = (config: Record<string, unknown> = limits): PluginPin => pinOf("transfer-limit", { config: config as PluginPin["config"] })

/** The rule transfer-limit implements, stated independently. */
const model = (amount: number, spent: number, c: typeof limits): string => {
  if (amount > c.deny_above || spent + amount > c.daily_deny_above) return "DENY"
  if (amount > c.witness_above || spent + amount > c.daily_witness_above) return "REQUIRE_WITNESS"
  return "ALLOW"
}

describe("transfer-limit", () => {
  it("allows under the threshold, holds above it, denies over the hard cap; alone, it decides (no base allow needed)", async () => {
    spentToday(0)
    expect((await rt.adjudicate([transferLimit()], "money_transfer", { amount: 10 })).verdict).toBe("ALLOW")
    const held = await rt.adjudicate([transferLimit()], "money_transfer", { amount: 5000 })
    expect(held).toMatchObject({ verdict: "REQUIRE_WITNESS", reasons: [{ by: "plugin:transfer-limit@1.0.0", reason: "amount 5000 is over the witness threshold 1000" }] })
    expect(await rt.adjudicate([transferLimit()], "money_transfer", { amount: 150_000 })).toMatchObject({ verdict: "DENY", reasons: [{ reason: "amount 150000 is over the hard cap 100000" }] })
  })

  it("reads spent_today through the granted counter: small transfers that add up are held, then denied", async () => {
    spentToday(4500)
    const r = await rt.adjudicate([transferLimit()], "money_transfer", { amount: 600 })
    expect(r).toMatchObject({ verdict: "REQUIRE_WITNESS", reasons: [{ reason: "spent today 4500 + 600 is over the daily witness threshold 5000" }] })
    // The host value is recorded with the decision, so an auditor can re-run it.
    expect(r.decisions[0]!.host_values).toEqual([{ fn: "wk_counter", arg: "spent_today", value: 4500 }])
    spentToday(199_500)
    expect(await rt.adjudicate([transferLimit()], "money_transfer", { amount: 600 })).toMatchObject({ verdict: "DENY", reasons: [{ reason: "spent today 199500 + 600 is over the daily hard cap 200000" }] })
    spentToday(0)
  })

  it("denies a missing or negative amount naming the field; defers on other tools", async () => {
    expect(await rt.adjudicate([transferLimit()], "money_transfer", { amount: -5 })).toMatchObject({ verdict: "DENY", reasons: [{ reason: "argument 'amount' must be a non-negative number" }] })
    expect(await rt.adjudicate([transferLimit()], "money_transfer", { amount: "5" })).toMatchObject({ verdict: "DENY" })
    // DEFER alone goes to the floor; with the base allow the other tool is allowed.
    expect((await rt.adjudicate([transferLimit()], "bank_balance", {})).reasons).toEqual([{ by: "floor", reason: "no adjudicator gave an opinion; the floor denies by default" }])
    expect((await rt.adjudicate([transferLimit(), baseAllow()], "bank_balance", {})).verdict).toBe("ALLOW")
  })

  it("without the counter grant the plugin refuses to load and the call fails closed", async () => {
    const r = await rt.adjudicate([pinOf("transfer-limit", { config: limits, capabilities: { host_functions: [] } })], "money_transfer", { amount: 1 })
    expect(r.verdict).toBe("DENY")
    expect(r.reasons[0]!.reason).toMatch(/plugin fault \(load\).*wk_counter/)
  })

  it("property: the verdict is the model's for any amount and spent today", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 250_000 }), fc.integer({ min: 0, max: 250_000 }), async (amount, spent) => {
        spentToday(spent)
        const r = await rt.adjudicate([transferLimit()], "money_transfer", { amount })
        expect(r.verdict).toBe(model(amount, spent, limits))
      }),
      { numRuns: 60 }
    )
    spentToday(0)
  })
})

const Ws = "/ws/project"
const writeScope = pinOf("write-scope", { config: { workspace: Ws, tools: { fs_write: ["path"], fs_move: ["from", "to"] } } })

describe("write-scope", () => {
  it("a write inside the workspace passes; outside needs a witness naming the canonical path", async () => {
    expect((await rt.adjudicate([writeScope, baseAllow()], "fs_write", { path: "src/a.ts", text: "x" })).verdict).toBe("ALLOW")
    const out = await rt.adjudicate([writeScope, baseAllow()], "fs_write", { path: `${Ws}/../../etc/passwd`, text: "x" })
    expect(out).toMatchObject({ verdict: "REQUIRE_WITNESS", reasons: [{ by: "plugin:write-scope@1.0.0", reason: `write outside the workspace ${Ws}: path = /etc/passwd` }] })
    const move = await rt.adjudicate([writeScope, baseAllow()], "fs_move", { from: "a", to: "/tmp/a" })
    expect(move.reasons[0]!.reason).toBe(`write outside the workspace ${Ws}: to = /tmp/a`)
  })

  it("a NUL byte or a non-string path is denied; other tools get no opinion", async () => {
    expect(await rt.adjudicate([writeScope, baseAllow()], "fs_write", { path: "a\u0000/../../x" })).toMatchObject({ verdict: "DENY", reasons: [{ reason: "argument 'path': path contains a NUL byte" }] })
    expect(await rt.adjudicate([writeScope, baseAllow()], "fs_write", { path: ["a"] })).toMatchObject({ verdict: "DENY", reasons: [{ reason: "argument 'path' must be a path string" }] })
    expect((await rt.adjudicate([writeScope, baseAllow()], "fs_read", { path: "/etc/passwd" })).verdict).toBe("ALLOW")
  })
})

const egress = pinOf("data-egress", { config: { tools: { http_post: { url_field: "url" } }, first_party: ["corp.example", "*.corp.example"] } })
const Source = "import { readFile } from 'node:fs'\nexport function main() {\n  return readFile('x')\n}\n"

describe("data-egress", () => {
  it("source code to a third-party host is denied, naming the host", async () => {
    const r = await rt.adjudicate([egress, baseAllow()], "http_post", { url: "https://paste.example.net/api", body: Source })
    expect(r.verdict).toBe("DENY")
    expect(r.reasons).toHaveLength(1)
    expect(r.reasons[0]!.reason).toMatch(/^source code egress: code \(\d+ markers, e\.g\. '.+'\) to third-party host 'paste\.example\.net'$/)
  })

  it("a source file name, nested values, userinfo tricks and unparsable URLs are caught", async () => {
    expect((await rt.adjudicate([egress, baseAllow()], "http_post", { url: "https://x.io/", files: [{ name: "main.py" }] })).reasons[0]!.reason).toContain("a source file name (.py)")
    expect((await rt.adjudicate([egress, baseAllow()], "http_post", { url: "https://corp.example@evil.io/up", body: Source })).reasons[0]!.reason).toContain("'evil.io'")
    expect((await rt.adjudicate([egress, baseAllow()], "http_post", { url: "not a url", body: Source })).reasons[0]!.reason).toContain("(unparsed url)")
  })

  it("source to a first-party host, and prose to anyone, get no objection", async () => {
    expect((await rt.adjudicate([egress, baseAllow()], "http_post", { url: "https://git.corp.example:8443/push", body: Source })).verdict).toBe("ALLOW")
    expect((await rt.adjudicate([egress, baseAllow()], "http_post", { url: "https://corp.example/", body: Source })).verdict).toBe("ALLOW")
    expect((await rt.adjudicate([egress, baseAllow()], "http_post", { url: "https://api.weather.io/q", body: "What is the weather in Oslo tomorrow? Please return it in Celsius." })).verdict).toBe("ALLOW")
  })
})
