import { describe, expect, it } from "vitest"
import { auditHistories } from "../../runtime/audit/Audit.js"
import { trustedRegistry } from "../../runtime/audit/TrustedRegistry.js"
import { startupDigest } from "../../runtime/audit/TrustRoot.js"
import { policyHistory } from "../../runtime/audit/PolicyHistory.js"
import type { CheckContext } from "../../runtime/audit/checks/Check.js"
import { devKeyPair, devPublicKey } from "../../runtime/client/DevKeys.js"
import { signEnvelope } from "../../runtime/schema/EnvelopeSignature.js"
import type { AppliedBy } from "../../runtime/schema/PolicyApplied.js"
import { PolicyApplyTool } from "../../runtime/policy/PolicyChange.js"
import { callDigest, contractDigest } from "../../runtime/schema/Canonical.js"
import type { EventOf, HeldEvent } from "../../runtime/schema/Events.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { testProfile } from "../support/Principals.js"
import { HeldId, HumanContract, adjudicated, at, attestation, digestOf, proposed, sequenced } from "../heldcall/Given.js"

// Forged histories of a policy change: the kernel's recorded verdict says ALLOW and the change
// was dispatched; the audit re-decides it from the profile and the registry in force and names
// what went wrong.
const org = testProfile()
const withThreshold = (witness_above: number): Profile => ({ ...org, rules: { money_transfer: { ...org.rules!["money_transfer"]!, witness_above } } }) as Profile
const widened = withThreshold(1e15)
const narrowed = withThreshold(500)

const change = (principal: string, profile: Profile): EventOf<"call.proposed"> => {
  const args = { profile: profile as never }
  return { ...proposed(1), principal, session_id: "policy", turn_id: "apply", call_id: "policy-forged", tool: PolicyApplyTool, args, call_digest: callDigest(PolicyApplyTool, args) }
}
const dispatched: HeldEvent = { type: "effect.dispatched", event_id: `effect.dispatched:${HeldId}:g1:a1`, held_id: HeldId, generation: 1, at: at(100), idempotency_key: `${HeldId}:g1`, attempt: 1, owner: "worker-1", policy_epoch: 1 }
/** An approval by `witness` signed with its registered key. */
const approvalBy = (witness: string, issued = 50): HeldEvent => {
  const e = attestation({ witness, class: "admin", decision: "approve", issued })
  return { ...e, envelope: { ...e.envelope!, key: devPublicKey(witness) } } as HeldEvent
}
const ctx: CheckContext = {
  policy: policyHistory([{ type: "policy.applied", event_id: "policy.applied:e1", epoch: 1, at: at(-60_000), profiles: [org] }]),
  newestAt: Date.parse(at(200)),
  settleMs: 30_000
}
const findings = (...events: ReadonlyArray<HeldEvent>) => {
  const checks = auditHistories([{ heldId: HeldId, events: sequenced(events) }], ctx).checks
  return checks.find((c) => c.name === "policy-authority")!
}
const allowed = adjudicated(1, { verdict: "ALLOW", contract: null })

describe("wk audit replay names unauthorized policy changes", () => {
  it("a widening applied with only its proposer's say -> 'widening applied without a second admin'", () => {
    const found = findings(change("admin:root", widened), allowed, dispatched)
    expect(found.status).toBe("failed")
    expect(found.violations).toEqual([expect.objectContaining({ held_id: HeldId, seqs: [1, 3], message: expect.stringMatching(/^widening applied without a second admin: admin:root/) })])
  })

  it("the proposer approving its own widening is no second admin; another admin's approval is", () => {
    expect(findings(change("admin:root", widened), allowed, approvalBy("admin:root"), dispatched).violations).toEqual([expect.objectContaining({ message: expect.stringMatching(/^widening applied without a second admin/) })])
    expect(findings(change("admin:root", widened), allowed, approvalBy("admin:ops"), dispatched)).toMatchObject({ status: "passed", checked: 1, violations: [] })
  })

  it("a policy change proposed by a non-admin -> 'policy change by a non-admin', even a narrowing", () => {
    for (const profile of [narrowed, widened]) {
      const found = findings(change("agent:mallory", profile), allowed, approvalBy("admin:ops"), dispatched)
      expect(found.violations).toEqual([expect.objectContaining({ message: expect.stringMatching(/^policy change by a non-admin: agent:mallory/) })])
    }
  })

  it("a narrowing by one admin is what the kernel does at once: nothing to name", () => {
    expect(findings(change("admin:root", narrowed), allowed, dispatched)).toMatchObject({ status: "passed", checked: 1, violations: [] })
  })
})

describe("wk audit replay names unauthorized epochs in the registry's history", () => {
  /** The history: the organization at epoch 1, then `next` applied as epoch 2 by `by`, trusted from the first record. */
  const epochs = (next: Profile, by?: AppliedBy) => {
    const records = [
      { type: "policy.applied" as const, event_id: "policy.applied:e1", epoch: 1, at: at(-60_000), profiles: [org], seq: 1, profiles_digest: startupDigest([org]) },
      { type: "policy.applied" as const, event_id: "policy.applied:e2", epoch: 2, at: at(-30_000), profiles: [next], seq: 2, profiles_digest: startupDigest([next]), ...(by !== undefined ? { applied_by: by } : {}) }
    ]
    return trustedRegistry(records, { _tag: "first-record" }, () => undefined)
  }
  const applyBy = (principal: string, profile: Profile): AppliedBy => ({ envelope: signEnvelope({ op: "policy.apply", principal, profile, nonce: "forged-nonce", expires_at: at(300_000) }, devKeyPair(principal).secretKey) })

  it("an epoch that widens, applied at once on one admin's signed request -> 'widening applied without a second admin', and not trusted", () => {
    const found = epochs(widened, applyBy("admin:root", widened))
    expect(found.finding.violations).toEqual([expect.objectContaining({ check: "registry", held_id: "policy.applied:e2", seqs: [2], message: expect.stringMatching(/^widening applied without a second admin: epoch 2 .*admin:root/) })])
    expect(found.records.map((r) => r.epoch)).toEqual([1])
  })

  it("an epoch applied on a non-admin's signed request -> 'policy change by a non-admin'", () => {
    expect(epochs(narrowed, applyBy("agent:mallory", narrowed)).finding.violations).toEqual([expect.objectContaining({ message: expect.stringMatching(/^policy change by a non-admin: epoch 2 was applied by agent:mallory/) })])
  })

  it("a narrowing one admin applied is trusted; a witnessed change with no such call or a widening with no origin is not", () => {
    expect(epochs(narrowed, applyBy("admin:root", narrowed))).toMatchObject({ finding: { violations: [] }, records: [{ epoch: 1 }, { epoch: 2 }] })
    expect(epochs(widened, { held_id: HeldId }).finding.violations).toEqual([expect.objectContaining({ message: expect.stringContaining(`names the witnessed change ${HeldId}, which has no events`) })])
    expect(epochs(widened).finding.violations).toEqual([expect.objectContaining({ message: expect.stringContaining("with no signed origin") })])
    expect(epochs(narrowed).records.map((r) => r.epoch)).toEqual([1, 2])
  })
})

describe("wk audit replay names edits that hand their editor a power", () => {
  const lower = { from: "acct-a", to: "carol", amount: 900 }
  const edited = (witness: string, klass: string): HeldEvent => ({
    type: "call.edited",
    event_id: `call.edited:${HeldId}:forged`,
    held_id: HeldId,
    generation: 2,
    at: at(60),
    witness,
    class: klass,
    tool: "money_transfer",
    args: lower,
    call_digest: callDigest("money_transfer", lower),
    from_call_digest: callDigest("money_transfer", { from: "acct-a", to: "acct-b", amount: 1500 }),
    envelope: signEnvelope(
      { op: "edit", principal: witness, class: klass, held_id: HeldId, generation: 1, call_digest: digestOf(1), contract_digest: contractDigest(HumanContract), args: lower, issued_at: at(50), expires_at: at(600_000), nonce: `edit-${witness}` },
      devKeyPair(witness).secretKey
    )
  })
  const allowedG2 = adjudicated(2, { verdict: "ALLOW", contract: null })
  const heldG1 = adjudicated(1)

  it("an edited generation recorded as ALLOW -> 'edited call allowed without a witness', on the adjudication's record", () => {
    const found = findings(proposed(1), heldG1, edited("user:carol", "human"), allowedG2)
    expect(found.violations).toEqual([expect.objectContaining({ held_id: HeldId, seqs: [4], message: expect.stringMatching(/^edited call allowed without a witness: generation 2, edited by user:carol/) })])
  })

  it("an edited generation held for the contract is what the kernel does: nothing to name", () => {
    expect(findings(proposed(1), heldG1, edited("user:carol", "human"), adjudicated(2)).violations).toEqual([])
  })

  it("a veto-only witness's edit is refused by the edit rule the audit re-judges (attestation-binding)", () => {
    const checks = auditHistories([{ heldId: HeldId, events: sequenced([proposed(1), heldG1, edited("compliance:zoe", "compliance"), adjudicated(2)]) }], ctx).checks
    const binding = checks.find((c) => c.name === "attestation-binding")!
    expect(binding.violations).toEqual([expect.objectContaining({ seqs: [3], message: expect.stringContaining("only an approver may edit") })])
  })
})
