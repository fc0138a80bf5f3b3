import { adjudicatePolicyChange, PolicyApplyTool } from "../../policy/PolicyChange.js"
import { keysOf } from "../../policy/ActivePolicy.js"
import { collector, type HeldCheck } from "./Check.js"

/**
 * `policy-authority`: no edited generation is allowed on an ALLOW alone (an edit is a new
 * proposal by its editor; the edit rule itself is re-judged by `attestation-binding`), and every
 * `kernel_policy_apply` dispatched (a policy change taking effect) was
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
      // An edited call is a proposal of its editor's: it waits for the contract it was held with.
      if (event.type === "call.adjudicated" && event.generation === before.generation && before.spec?.edited_by !== undefined) {
        c.count()
        if (event.verdict === "ALLOW") c.fail([seq], `edited call allowed without a witness: generation ${event.generation}, edited by ${before.spec.edited_by.witness}, was allowed; an edited call is released only by the contract it was held with`)
      }
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
          keysOf(inForce.policy, e.witness).includes(e.key)
      )
      if (seconds.length === 0) {
        c.fail(seqs, `widening applied without a second admin: ${proposer}'s change (${decided.reasons[0]?.reason ?? "widens policy"}) was dispatched with no valid approval from another policy admin (epoch ${inForce.epoch})`)
      }
    }
    return c.done()
  }
}
