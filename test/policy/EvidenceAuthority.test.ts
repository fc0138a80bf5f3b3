import { describe, expect, it } from "vitest"
import { activePolicy } from "../../runtime/policy/ActivePolicy.js"
import { checkLayers, widens } from "../../runtime/policy/Layers.js"
import { joinContracts } from "../../runtime/policy/Fold.js"
import type { EvidenceTerm } from "../../runtime/schema/EvidenceTerm.js"
import type { Profile } from "../../runtime/schema/Profile.js"

// Evidence terms are authority: a layer or a join may add them, never drop them, and a policy
// change that drops or changes one is a widening (it needs the witnessed path).
const key = "YJSjUsQ9Y/uCYgLTMT+eOuFr+yWjVyB8EhU0/R3Wd5Q="
const merged: EvidenceTerm = { name: "merged", kind: "git-ancestry", by: { class: "verifier" }, params: { repo: "app", commit: "{args.commit}", ref: "main" }, expect: { is_ancestor: true } }
const ci: EvidenceTerm = { name: "ci", kind: "ci-status", by: { class: "ci" }, expect: { commit: "{args.commit}", conclusion: "success" } }
const org: Profile = {
  name: "acme-org",
  layer: "organization",
  principals: { "agent:alice": { keys: [key], classes: ["agent"] } },
  grants: { "agent:alice": ["deploy"] },
  rules: { deploy: { always_witness: true, contract: { rule: { class: "human" }, evidence: [merged] } } }
}

describe("evidence terms under layers and joins", () => {
  it("a project layer's contract is joined to the organization's: the organization's term stays, the project's is added", () => {
    const project: Profile = { name: "web", layer: "project", rules: { deploy: { contract: { rule: { class: "sre" }, evidence: [ci] } } } }
    expect(checkLayers([org, project])).toEqual([])
    const contract = activePolicy(1, [org, project]).rules.get("deploy")?.contract
    expect(contract?.evidence?.map((t) => t.name).sort()).toEqual(["ci", "merged"])
  })

  it("a project layer whose contract names no evidence cannot switch the organization's term off", () => {
    const project: Profile = { name: "web", layer: "project", rules: { deploy: { contract: { rule: { class: "human" } } } } }
    expect(checkLayers([org, project])).toEqual([])
    expect(activePolicy(1, [org, project]).rules.get("deploy")?.contract?.evidence).toEqual([merged])
  })

  it("a policy change that drops or changes a term is a widening", () => {
    const dropped: Profile = { ...org, rules: { deploy: { always_witness: true, contract: { rule: { class: "human" } } } } }
    expect(widens([org], [dropped]).map((w) => `${w.field}: ${w.message}`)).toEqual(["rules.deploy.contract.evidence: evidence term 'merged' (git-ancestry) is dropped or changed"])
    const loosened: Profile = { ...org, rules: { deploy: { always_witness: true, contract: { rule: { class: "human" }, evidence: [{ ...merged, expect: {} }] } } } }
    expect(widens([org], [loosened]).map((w) => w.field)).toEqual(["rules.deploy.contract.evidence", "rules.deploy.contract.evidence"])
  })

  it("a new term is a widening too: its query or command is a power the verifier uses for the organization", () => {
    const added = widens([org], [{ ...org, rules: { deploy: { always_witness: true, contract: { rule: { class: "human" }, evidence: [merged, ci] } } } }])
    expect(added.map((w) => w.field)).toEqual(["rules.deploy.contract.evidence"])
    expect(added[0]!.message).toContain(`verifiers run ${ci.kind} 'ci'`)
  })

  it("joining plugin and rule contracts keeps every term once", () => {
    const joined = joinContracts([{ rule: { class: "human" }, evidence: [merged] }, { rule: { class: "fraud" }, evidence: [ci, merged] }])
    expect(joined.evidence?.map((t) => t.name).sort()).toEqual(["ci", "merged"])
  })

  it("dropping or changing a principal's session namespace is a widening (it could make a dependent reviewer independent)", () => {
    const withNs: Profile = { ...org, principals: { ...org.principals, "agent:alice-reviewer": { keys: [key], classes: ["peer"], namespace: "alice" } } }
    const dropped: Profile = { ...org, principals: { ...org.principals, "agent:alice-reviewer": { keys: [key], classes: ["peer"] } } }
    expect(widens([withNs], [dropped]).map((w) => `${w.field}: ${w.message}`)).toEqual(["principals.agent:alice-reviewer.namespace: namespace 'alice' is dropped"])
    expect(widens([dropped], [withNs])).toEqual([])
  })
})
