import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { checkLayers, widens } from "../../runtime/policy/Layers.js"
import type { Profile, ToolRule } from "../../runtime/schema/Profile.js"
import type { PluginPin } from "../../runtime/schema/PluginPin.js"

const key = "YJSjUsQ9Y/uCYgLTMT+eOuFr+yWjVyB8EhU0/R3Wd5Q="
const org: Profile = {
  name: "acme-org",
  layer: "organization",
  principals: { "agent:alice": { keys: [key], classes: ["agent"] }, "user:carol": { keys: [key], classes: ["human"] } },
  grants: { "agent:alice": ["money_transfer", "bank_balance"] },
  rules: { money_transfer: { amount_field: "amount", witness_above: 1000, deny_above: 100000, contract: { rule: { class: "human" }, veto: ["compliance"] } } },
  admins: ["admin:root"],
  preferences: { "*": { disclosure: "redacted" } }
}

const opt = <A>(a: fc.Arbitrary<A>) => fc.option(a, { nil: undefined })
const clean = <A>(a: A): A => JSON.parse(JSON.stringify(a)) as A

// A layer that can only narrow `org`: lower thresholds, more witnesses, a subset of grants, stricter preferences.
const narrowing = (name: string, layer: "project" | "user"): fc.Arbitrary<Profile> =>
  fc
    .record({
      grants: opt(fc.subarray(["money_transfer", "bank_balance"])),
      rule: opt(
        fc.record({
          witness_above: opt(fc.integer({ min: 0, max: 1000 })),
          deny_above: opt(fc.integer({ min: 0, max: 100000 })),
          always_witness: opt(fc.constant(true)),
          contract: opt(fc.constantFrom({ rule: { class: "fraud" } }, { rule: { class: "human" }, veto: ["compliance", "risk"] }))
        })
      ),
      other: opt(fc.record({ always_witness: fc.constant(true) })),
      prefs: opt(
        fc.record({
          require_witness: opt(fc.constant(true)),
          always_witness: opt(fc.subarray(["money_*", "fs_write"])),
          expires_in_ms: opt(fc.integer({ min: 1, max: 1_000_000 })),
          disclosure: opt(fc.constant("redacted" as const)),
          cancel_on_disconnect: opt(fc.constant(true)),
          witness_route: opt(fc.constantFrom({ class: "human" }, { principal: "user:carol" }))
        })
      ),
      ttl: opt(fc.integer({ min: 1, max: 3_600_000 }))
    })
    .map((r) =>
      clean<Profile>({
        name,
        layer,
        ...(r.grants ? { grants: { "agent:alice": r.grants } } : {}),
        rules: { ...(r.rule ? { money_transfer: r.rule as ToolRule } : {}), ...(r.other ? { fs_write: r.other } : {}) },
        ...(r.prefs ? { preferences: { "agent:alice": r.prefs } } : {}),
        ...(r.ttl ? { held_ttl_ms: r.ttl } : {})
      })
    )

describe("checkLayers", () => {
  it("names the layer, the profile and the field of a widening grant", () => {
    const user: Profile = { name: "carol-prefs", layer: "user", grants: { "agent:alice": ["wire_transfer"] } }
    expect(checkLayers([org, user]).map((e) => e.message)).toEqual(["user layer 'carol-prefs' widens grants.agent:alice: 'wire_transfer' is not granted by organization 'acme-org'"])
  })
  it("refuses a project that loosens a threshold, adds an admin or a principal", () => {
    const project: Profile = { name: "payments", layer: "project", rules: { money_transfer: { witness_above: 5000 } }, admins: ["admin:eve"], principals: { "agent:mallory": { keys: [key], classes: ["agent"] } } }
    expect(checkLayers([org, project]).map((e) => e.field)).toEqual(["principals.agent:mallory", "admins", "rules.money_transfer.witness_above"])
  })
  it("refuses a user layer that discloses more than the organization", () => {
    const user: Profile = { name: "carol", layer: "user", preferences: { "*": { disclosure: "exact" } } }
    expect(checkLayers([org, user])[0]?.message).toBe("user layer 'carol' widens preferences.*.disclosure: disclosure 'exact' discloses more than 'redacted'")
  })
  it("a user layer is checked against the project below it too", () => {
    const project: Profile = { name: "payments", layer: "project", rules: { money_transfer: { witness_above: 500 } } }
    const user: Profile = { name: "carol", layer: "user", rules: { money_transfer: { witness_above: 800 } } }
    expect(checkLayers([org, project, user]).map((e) => e.message)).toEqual(["user layer 'carol' widens rules.money_transfer.witness_above: witness_above 800 is looser than 500"])
  })
  it("a pin's scope (tools) is judged by widens: stopping to apply to a tool widens; applying to more widens only where the pin can allow, change or hold", () => {
    const pin: PluginPin = { name: "spend-limit", version: "1.0.0", sha256: "b".repeat(64), signer: key, stages: ["adjudicate"], tools: ["money_transfer"] }
    const at = (p: PluginPin, layer: "organization" | "project" = "organization"): Profile => ({ ...org, layer, plugins: [p] })
    // Narrowed so it stops applying to money_transfer: its checks no longer run there.
    expect(widens([at(pin)], [at({ ...pin, tools: ["bank_balance"] })]).map((w) => `${w.field}: ${w.message}`)).toEqual([
      "plugins.spend-limit.tools: plugin spend-limit@1.0.0 at the floor or organization layer stops applying to money_transfer"
    ])
    expect(widens([at({ ...pin, tools: ["money_*"] })], [at(pin)]).map((w) => w.message)).toEqual(["plugin spend-limit@1.0.0 at the floor or organization layer stops applying to money_*"])
    // Applying to more tools: an organization adjudicator reaches calls it did not; a project one only narrows them.
    const { tools: _scope, ...everyTool } = pin
    expect(widens([at(pin)], [at(everyTool)]).map((w) => w.field)).toEqual(["plugins.spend-limit.tools"])
    expect(widens([at(pin, "project")], [at(everyTool, "project")])).toEqual([])
    // An admission pin applying to more tools only quarantines more.
    const admit: PluginPin = { ...pin, stages: ["admit"] }
    expect(widens([at(admit)], [at({ ...admit, tools: ["money_transfer", "bank_balance"] })])).toEqual([])
    expect(widens([at({ ...admit, tools: ["money_transfer", "bank_balance"] })], [at(admit)]).map((w) => w.message)).toEqual(["plugin spend-limit@1.0.0 at the floor or organization layer stops applying to bank_balance"])
  })
  it("refuses a transform pinned at a project layer: it could steer a held transfer to a tool with a looser rule", () => {
    const alias = { name: "tool-alias", version: "1.0.0", sha256: "a".repeat(64), signer: key, stages: ["transform" as const], config: { aliases: { money_transfer: "bank_balance" } } }
    const project: Profile = { name: "payments", layer: "project", plugins: [alias] }
    expect(checkLayers([org, project]).map((e) => e.message)).toEqual(["project layer 'payments' widens plugins.0.stages: plugin tool-alias may not transform at a narrowing layer: a transform changes the call that runs"])
    expect(checkLayers([org, { ...project, plugins: [{ ...alias, stages: ["adjudicate" as const] }] }])).toEqual([])
  })
  it("refuses a project or user layer that binds bearer tokens to a principal: only the organization adds identities", () => {
    const binding = { issuer: "https://idp.example.com", audience: "https://wk.example.com/mcp", subject: "mallory", principal: "agent:alice" }
    const project: Profile = { name: "payments", layer: "project", identities: [binding] }
    expect(checkLayers([org, project]).map((e) => e.message)).toEqual([
      "project layer 'payments' widens identities.0: identity binding of https://idp.example.com subject 'mallory' to agent:alice is not bound by organization 'acme-org'"
    ])
    expect(checkLayers([org, { ...project, layer: "user", identities: [{ issuer: binding.issuer, audience: binding.audience, group: "ops", principal: "agent:alice" }] }]).map((e) => e.field)).toEqual(["identities.0"])
    // Repeating the organization's own binding adds nothing.
    expect(checkLayers([{ ...org, identities: [binding] }, project])).toEqual([])
  })
  it("organization profiles are not narrow-only", () => {
    expect(checkLayers([org, { name: "acme-extra", grants: { "agent:bob": ["x"] } }])).toEqual([])
  })
  it("narrowing layers are never reported (property)", () => {
    fc.assert(fc.property(narrowing("p", "project"), narrowing("u", "user"), (p, u) => {
      // Each generated layer narrows the organization; two of them may still disagree with each other.
      expect(checkLayers([org, p])).toEqual([])
      expect(checkLayers([org, u])).toEqual([])
    }))
  })
})

describe("widens", () => {
  it("lists raised thresholds, dropped vetoes, grants and the powers a new grant gives (the default contract's humans may edit its calls)", () => {
    const looser: Profile = { ...org, grants: { "agent:alice": ["money_transfer", "bank_balance", "wire_transfer"] }, rules: { money_transfer: { amount_field: "amount", witness_above: 5000, contract: { rule: { class: "human" } } } } }
    expect(widens([org], [looser]).map((w) => `${w.field}: ${w.message}`)).toEqual([
      "grants.agent:alice: 'wire_transfer' is granted",
      "rules.wire_transfer.contract: user:carol: edits held wire_transfer calls",
      "rules.money_transfer.witness_above: witness_above 5000 is looser than 1000",
      "rules.money_transfer.deny_above: deny_above removed is looser than 100000",
      "rules.money_transfer.contract.veto: veto class 'compliance' is dropped"
    ])
  })
  it("removing a layer that narrowed is a widening", () => {
    const p: Profile = { name: "p", layer: "project", rules: { money_transfer: { witness_above: 10 } } }
    expect(widens([org, p], [org]).map((w) => w.field)).toEqual(["rules.money_transfer.witness_above"])
  })
  it("adding a narrower layer never widens the merged policy (monotonicity)", () => {
    fc.assert(fc.property(narrowing("p", "project"), narrowing("u", "user"), (p, u) => {
      expect(widens([org], [org, p])).toEqual([])
      expect(widens([org, p], [org, p, u])).toEqual([])
    }))
  })
  it("is independent of profile order", () => {
    fc.assert(
      fc.property(narrowing("p", "project"), narrowing("u", "user"), fc.boolean(), (p, u, flip) => {
        const before = [org, p]
        const after = flip ? [u, org] : [org, u]
        const sorted = (ws: ReadonlyArray<{ field: string; message: string }>) => ws.map((w) => `${w.field} ${w.message}`).sort()
        expect(sorted(widens(before, after))).toEqual(sorted(widens([...before].reverse(), [...after].reverse())))
        expect(checkLayers([org, p, u])).toEqual(checkLayers([u, p, org]).filter(() => true).sort((a, b) => ([org, p, u].findIndex((x) => x.name === a.profile) - [org, p, u].findIndex((x) => x.name === b.profile))))
      })
    )
  })
})
