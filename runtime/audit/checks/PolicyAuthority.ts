import { widens } from "../../policy/Layers.js"
import { adjudicatePolicyChange, PolicyApplyTool } from "../../policy/PolicyChange.js"
import { canonicalize } from "../../schema/Canonical.js"
import { envelopeSignatureValid } from "../../schema/EnvelopeSignature.js"
import type { PolicyHistory } from "../PolicyHistory.js"
import { collector, type Finding, type HeldCheck } from "./Check.js"

/**
 * `policy-authority`: every `kernel_policy_apply` dispatched (a policy change taking effect) was
 * proposed by a policy admin of the registry in force when it was proposed, and, when the kernel
 * floor re-decides it under the policy in force at its dispatch and finds that it widens, a
 * valid approval of that generation from another admin (its key registered then) stood. The
 * call's own recorded verdict is not trusted: the decision is recomputed from the profile.
 */
export const policyAuthority: HeldCheck = {
  name: "policy-authority",
  run: (call, ctx) => {
    const c = collector("policy-authority", call.heldId)
    let proposedSeq: number | undefined
    for (const { seq, event, before, fresh } of call.steps) {
      if (!fresh) continue
      if (event.type === "call.proposed") proposedSeq = seq
      const spec = before.spec
      if (event.type !== "effect.dispatched" || spec === null || spec.tool !== PolicyApplyTool) continue
      c.count()
      const seqs = proposedSeq === undefined ? [seq] : [proposedSeq, seq]
      const inForce = ctx.policy.at(seq, event.at)
      if (inForce === undefined) {
        c.unsure([seq], `no policy record in force at ${event.at}: cannot tell whether this policy change was authorized`)
        continue
      }
      const proposer = spec.principal
      const wasAdmin = inForce.policy.admins.has(proposer) || ctx.policy.around(spec.created_at).some((p) => p.policy.admins.has(proposer))
      if (!wasAdmin) {
        c.fail(seqs, `policy change by a non-admin: ${proposer} proposed ${PolicyApplyTool} and was not a policy admin (epoch ${inForce.epoch}); it was dispatched`)
        continue
      }
      const decided = adjudicatePolicyChange(inForce.policy, proposer, spec.args)
      if (decided.verdict !== "REQUIRE_WITNESS" && decided.verdict !== "DENY") continue
      if (decided.verdict === "DENY") {
        c.fail(seqs, `policy change dispatched although the kernel floor denies it under epoch ${inForce.epoch}: ${decided.reasons[0]?.reason ?? "denied"}`)
        continue
      }
      const seconds = before.evidence.filter(
        (e) =>
          e.generation === before.generation &&
          e.status === "valid" &&
          e.decision === "approve" &&
          e.witness !== proposer &&
          inForce.policy.admins.has(e.witness) &&
          (inForce.policy.principals.get(e.witness)?.keys.includes(e.key) ?? false)
      )
      if (seconds.length === 0) {
        c.fail(seqs, `widening applied without a second admin: ${proposer}'s change (${decided.reasons[0]?.reason ?? "widens policy"}) was dispatched with no valid approval from another policy admin (epoch ${inForce.epoch})`)
      }
    }
    return c.done()
  }
}

/**
 * `policy-authority` over the registry's history: each epoch after the first, against the one
 * before it. An epoch applied at once by a signed `policy.apply` must carry a valid envelope of
 * a policy admin of the epoch before ("policy change by a non-admin") whose profile it applies,
 * and must not widen ("widening applied without a second admin": a widening runs only as a
 * witnessed `kernel_policy_apply`, which the held-call check judges). An epoch that widens and
 * records no origin (profile files at start-up) is reported unverified.
 */
export const policyEpochAuthority = (history: PolicyHistory): Finding => {
  const violations: Array<Finding["violations"][number]> = []
  const unverified: Array<Finding["unverified"][number]> = []
  let checked = 0
  const epochs = history.epochs
  for (let i = 1; i < epochs.length; i++) {
    const prev = epochs[i - 1]!
    const cur = epochs[i]!
    const label = `policy.applied:e${cur.epoch}`
    const c = collector("policy-authority", label)
    checked++
    const widenings = widens(prev.policy.profiles, cur.policy.profiles)
    const why = widenings.map((w) => `${w.field}: ${w.message}`).join("; ")
    const by = cur.applied_by
    if (by === undefined) {
      if (widenings.length > 0) c.unsure([cur.seq], `epoch ${cur.epoch} widens policy (${why}) and records no origin (profile files at start-up, or an older kernel): cannot tell who authorized it`)
    } else if ("envelope" in by) {
      const env = by.envelope
      const principal = String(env.payload["principal"] ?? "")
      const registered = prev.policy.principals.get(principal)?.keys.includes(env.key) ?? false
      if (!envelopeSignatureValid(env) || env.payload["op"] !== "policy.apply" || !registered) {
        c.fail([cur.seq], `epoch ${cur.epoch} was applied by an envelope that is not a valid policy.apply signed with a key registered to ${JSON.stringify(principal)} in epoch ${prev.epoch}`)
      } else if (!prev.policy.admins.has(principal)) {
        c.fail([cur.seq], `policy change by a non-admin: epoch ${cur.epoch} was applied by ${principal}, not a policy admin in epoch ${prev.epoch}`)
      } else {
        const signed = canonicalize(env.payload["profile"] ?? null)
        if (!cur.policy.profiles.some((p) => canonicalize(p) === signed)) c.fail([cur.seq], `epoch ${cur.epoch} does not hold the profile ${principal} signed`)
        if (widenings.length > 0) c.fail([cur.seq], `widening applied without a second admin: epoch ${cur.epoch} was applied at once on ${principal}'s request although it widens policy (${why})`)
      }
    }
    const f = c.done()
    violations.push(...f.violations)
    unverified.push(...f.unverified)
  }
  return { checked, violations, unverified }
}
