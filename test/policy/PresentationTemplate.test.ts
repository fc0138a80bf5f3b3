import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { Either } from "effect"
import { fallbackSummary, groupDigits, renderTemplate, summaryOf, templateFor } from "../../runtime/policy/PresentationTemplate.js"
import { decodeWith } from "../../runtime/schema/DecodeWith.js"
import { Profile } from "../../runtime/schema/Profile.js"

fc.configureGlobal({ seed: Number(process.env["WK_FC_SEED"] ?? 8785) })

const Transfer = "Transfer {amount} EUR from {from} to {to}"

describe("presentation templates: given a profile's template for a tool, when a call is shown, then its summary reads as a sentence", () => {
  it("fills argument fields, grouping digits", () => {
    expect(renderTemplate(Transfer, { from: "alice", to: "bob", amount: 2500 })).toBe("Transfer 2,500 EUR from alice to bob")
    expect(renderTemplate("Pay {to.name} {amount}", { to: { name: "bob" }, amount: 1234567.5 })).toBe("Pay bob 1,234,567.5")
  })

  it("renders nothing when a field is missing or not a scalar: the fallback is used, never a half sentence", () => {
    expect(renderTemplate(Transfer, { from: "alice", amount: 2500 })).toBeUndefined()
    expect(renderTemplate(Transfer, { from: "alice", to: { iban: "x" }, amount: 2500 })).toBeUndefined()
    expect(renderTemplate("{toString}", {})).toBeUndefined()
    expect(summaryOf({ tool: "money_transfer", args: { from: "alice", amount: 2500 }, redacted: false, template: Transfer })).toBe("money_transfer: amount 2,500, from alice")
  })

  it("an argument cannot pass itself off as the template's text: it is quoted, stripped of control and direction characters, and cut", () => {
    expect(renderTemplate(Transfer, { from: "alice", to: "bob, then 9,999 EUR to eve", amount: 5 })).toBe('Transfer 5 EUR from alice to "bob, then 9,999 EUR to eve"')
    expect(renderTemplate("to {to}", { to: "eve\u202Eboj\n" })).toBe("to eveboj")
    const long = renderTemplate("to {to}", { to: "x".repeat(500) })!
    expect(long.length).toBeLessThan(80)
    expect(long).toContain("…")
  })

  it("a redacted call shows no values: the template is skipped", () => {
    expect(summaryOf({ tool: "money_transfer", args: { amount: "[redacted number]" }, redacted: true, template: Transfer })).toBe("money_transfer (arguments redacted)")
  })

  it("a plugin's summary comes first, then the template, then the fallback made from the call", () => {
    const args = { from: "alice", to: "bob", amount: 2500 }
    expect(summaryOf({ tool: "t", args, redacted: false, providerSummary: "plugin", template: Transfer })).toBe("plugin")
    expect(summaryOf({ tool: "t", args, redacted: false, template: Transfer })).toBe("Transfer 2,500 EUR from alice to bob")
    expect(summaryOf({ tool: "t", args, redacted: false })).toBe("t: amount 2,500, from alice, to bob")
    // A redacted call is titled by its tool, never by the rule's text.
    expect(summaryOf({ tool: "t", args, redacted: true, template: Transfer })).toBe("t (arguments redacted)")
  })

  it("the fallback names the first four scalar arguments and counts the rest", () => {
    expect(fallbackSummary("t", { a: 1, b: "x", c: true, d: [1], e: 2, f: 3 }, false)).toBe("t: a 1, b x, c yes, e 2, 2 more")
    expect(fallbackSummary("t", {}, false)).toBe("t")
  })

  it("an organization's template wins over a project's for the same tool", () => {
    const org = { name: "org", layer: "organization" as const, presentation: { money_transfer: "org {amount}" } }
    const project = { name: "a-project", layer: "project" as const, presentation: { money_transfer: "project {amount}", bank_balance: "balance of {account}" } }
    expect(templateFor([project, org], "money_transfer")).toBe("org {amount}")
    expect(templateFor([project, org], "bank_balance")).toBe("balance of {account}")
    expect(templateFor([org], "other")).toBeUndefined()
  })

  it("a profile with a malformed template is refused naming the field", () => {
    const bad = decodeWith(Profile, { name: "p", presentation: { money_transfer: "Transfer {amount EUR" } })
    expect(Either.isLeft(bad)).toBe(true)
    const message = JSON.stringify(Either.isLeft(bad) ? bad.left : {})
    expect(message).toContain("presentation")
    expect(message).toContain("money_transfer")
    expect(Either.isRight(decodeWith(Profile, { name: "p", presentation: { money_transfer: Transfer } }))).toBe(true)
  })
})

describe("presentation templates: properties", () => {
  it("a rendered summary never holds a control or direction-override character, whatever the arguments", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 80 }), fc.string({ unit: "binary", maxLength: 80 }), fc.double({ noNaN: true }), (from, to, amount) => {
        const s = renderTemplate(Transfer, { from, to, amount })
        expect(s).toBeDefined()
        expect(s!).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]/)
      })
    )
  })

  it("digit grouping keeps the number: removing the commas gives it back", () => {
    fc.assert(fc.property(fc.integer(), (n) => {
      expect(Number(groupDigits(n).replace(/,/g, ""))).toBe(n)
    }))
  })
})
