import { describe, expect, it } from "vitest"
import { activePolicy } from "../../runtime/policy/ActivePolicy.js"
import { adjudicatePolicyChange, policyCall } from "../../runtime/policy/PolicyChange.js"
import { testProfile } from "../support/Principals.js"

// The kernel floor's decision for kernel_policy_apply, pure: who may, what runs at once, who witnesses.
const profile = testProfile()
const policy = activePolicy(7, [profile])
const rule = profile.rules!["money_transfer"]!
const threshold = (witness_above: number) => ({ ...profile, rules: { money_transfer: { ...rule, witness_above } } })

describe("adjudicatePolicyChange", () => {
  it("denies a principal that is not a policy admin", () => {
    expect(adjudicatePolicyChange(policy, "agent:alice", { profile: threshold(10) })).toMatchObject({ verdict: "DENY", reasons: [{ reason: "principal 'agent:alice' is not a policy admin" }] })
  })
  it("allows a narrowing at once", () => {
    expect(adjudicatePolicyChange(policy, "admin:root", { profile: threshold(10) }).verdict).toBe("ALLOW")
  })
  it("holds a widening for any other admin, by name, and says what widens", () => {
    const a = adjudicatePolicyChange(policy, "admin:root", { profile: threshold(50_000) })
    expect(a.verdict).toBe("REQUIRE_WITNESS")
    expect(a.contract?.rule).toEqual({ principal: "admin:ops" })
    expect(a.reasons[0]!.reason).toContain("rules.money_transfer.witness_above")
    const three = activePolicy(7, [{ ...profile, admins: ["admin:root", "admin:ops", "user:carol"] }])
    expect(adjudicatePolicyChange(three, "admin:ops", { profile: threshold(50_000) }).contract?.rule).toEqual({ any: [{ principal: "admin:root" }, { principal: "user:carol" }] })
  })
  it("denies a widening when no other admin could witness it", () => {
    const alone = activePolicy(7, [{ ...profile, admins: ["admin:root"] }])
    expect(adjudicatePolicyChange(alone, "admin:root", { profile: { ...threshold(50_000), admins: ["admin:root"] } }).reasons[0]!.reason).toContain("no other policy admin")
  })
  it("denies a profile that does not decode, naming the field", () => {
    const a = adjudicatePolicyChange(policy, "admin:root", { profile: { name: "" } })
    expect(a.verdict).toBe("DENY")
    expect(a.reasons[0]!.reason).toContain("args.profile.name")
  })
  it("derives one call id per signed request", () => {
    expect(policyCall({ profile: threshold(1), nonce: "n1" })).toEqual(policyCall({ profile: threshold(1), nonce: "n1" }))
    // The same profile under another nonce is another change: a profile applied again is judged again.
    expect(policyCall({ profile: threshold(1), nonce: "n1" }).call_id).not.toBe(policyCall({ profile: threshold(1), nonce: "n2" }).call_id)
    expect(policyCall({ profile: threshold(1) }).call_id).not.toBe(policyCall({ profile: threshold(2) }).call_id)
  })
})
