import { activePolicy, registryOf, type ActivePolicy } from "../../policy/ActivePolicy.js"
import { countingApprovals } from "../../heldcall/Counting.js"
import { satisfies } from "../../heldcall/WitnessRuleEval.js"
import type { Evidence, HeldCallFacts } from "../../schema/Facts.js"
import { judgeAttestation } from "../../heldcall/decide/Attest.js"
import { AttestPayload, EditPayload, ExtendPayload } from "../../schema/Requests.js"
import { judgeExtend } from "../../heldcall/decide/Extend.js"
import { judgeEdit } from "../../heldcall/decide/Edit.js"
import { AttestBatchPayload, attestationOfBatch } from "../../schema/BatchAttestation.js"
import { compileGuard } from "../internal/compileGuard.js"
import { collector, type HeldCheck } from "./Check.js"

const isAttest = compileGuard(AttestPayload)
const isEdit = compileGuard(EditPayload)
const isExtend = compileGuard(ExtendPayload)
const isBatch = compileGuard(AttestBatchPayload)

/** Fields an accepted attestation event copies from the signed request. */
const Copied = ["generation", "call_digest", "contract_digest", "decision", "issued_at", "expires_at", "nonce", "evidence_digest", "presentation_digest", "reason"] as const

/**
 * `attestation-binding`: every `attestation.accepted` records what was signed, and the kernel's
 * own acceptance rule (`judgeAttestation`, invariants 3 and 4) accepts it against the facts just
 * before it, at its time, under the registry then in force: bound to this held call, its
 * generation, call digest and contract digest, unexpired, unreplayed, from a registered
 * witness of an admitted class, independent of the proposer. Every `call.edited` passes the
 * kernel's own edit rule (`judgeEdit`) the same way. And at every `effect.dispatched`
 * of a witnessed call, no approval counted whose signing key the registry in force no longer
 * held (a removed key's approvals stop counting): each one the rule needed is named.
 */
export const attestationBinding: HeldCheck = {
  name: "attestation-binding",
  run: (call, ctx) => {
    const c = collector("attestation-binding", call.heldId)
    const acceptedAt = new Map<string, number>()
    for (const { seq, event, before, fresh } of call.steps) {
      if (event.type === "effect.dispatched" && fresh) {
        const inForce = ctx.policy.at(seq, event.at) ?? ctx.policy.byEpoch(event.policy_epoch)
        if (inForce === undefined) continue
        for (const e of removedKeyApprovals(before, inForce.policy, Date.parse(event.at))) {
          c.fail([acceptedAt.get(e.attestation_digest) ?? seq, seq], `approval by ${e.witness} counted at dispatch although its key ${e.key.slice(0, 12)}… was no longer registered to it (epoch ${inForce.epoch})`)
        }
        continue
      }
      if (event.type === "call.edited" && fresh) {
        c.count()
        const e: unknown = event.envelope.payload
        if (!isEdit(e)) {
          c.fail([seq], "the signed edit is not an edit payload (protocol: Edit)")
          continue
        }
        const inForce = ctx.policy.registryAt(seq, event.at, ctx.storedAt?.(seq) ?? 0)
        if (inForce.length === 0) {
          c.unsure([seq], `no policy record before seq ${seq}: the editor's registration and class not verified`)
          continue
        }
        const refusals = inForce.map((x) => judgeEdit(before, e, event.envelope, registryOf(x.policy), Date.parse(event.at)))
        if (refusals.every((r) => r !== null)) c.fail([seq], `the kernel's own edit rule refuses this edit: ${String(refusals[0]!["reason"] ?? JSON.stringify(refusals[0]))}`)
        continue
      }
      if (event.type === "call.extended" && fresh) {
        c.count()
        const e: unknown = event.envelope.payload
        if (!isExtend(e)) {
          c.fail([seq], "the signed extension is not an extend payload (protocol: Extend)")
          continue
        }
        const inForce = ctx.policy.registryAt(seq, event.at, ctx.storedAt?.(seq) ?? 0)
        if (inForce.length === 0) {
          c.unsure([seq], `no policy record before seq ${seq}: the extension's witness not verified`)
          continue
        }
        const refusals = inForce.map((x) => judgeExtend(before, e, event.envelope, registryOf(x.policy), Date.parse(event.at), x.policy.heldTtlMs))
        if (refusals.every((r) => r !== null)) c.fail([seq], `the kernel's own extension rule refuses this extension: ${String(refusals[0]!["reason"] ?? JSON.stringify(refusals[0]))}`)
        continue
      }
      if (event.type !== "attestation.accepted" || !fresh) continue
      acceptedAt.set(event.attestation_digest, seq)
      c.count()
      const signed: unknown = event.envelope.payload
      // A batch attestation is judged as the single attestation it makes about this call.
      const p: unknown = isBatch(signed) ? attestationOfBatch(signed, call.heldId) : signed
      if (!isAttest(p)) {
        c.fail([seq], "the signed attestation is not an attest payload (protocol: Attest)")
        continue
      }
      const differs: Array<string> = Copied.filter((k) => (event as Record<string, unknown>)[k] !== (p as Record<string, unknown>)[k])
      if (event.witness !== p.principal) differs.push("principal")
      if (event.class !== p.class) differs.push("class")
      if (differs.length > 0) c.fail([seq], `the event's ${differs.join(", ")} differ from the signed attestation`)
      if (p.held_id !== call.heldId) c.fail([seq], `the signed attestation is bound to ${p.held_id}, not this call`)
      if (before.spec === null) {
        c.fail([seq], "accepted before any proposal of this call")
        continue
      }
      // The registry in force where the approval is stored, never at the time it claims: an
      // approval written after its key was removed and dated before is named as backdated.
      const inForce = ctx.policy.registryAt(seq, event.at, ctx.storedAt?.(seq) ?? 0)
      const policies: ReadonlyArray<ActivePolicy> =
        inForce.length > 0 ? inForce.map((e) => e.policy) : [activePolicy(0, [{ name: "unrecorded", principals: { [p.principal]: { keys: [], classes: [p.class] } } }])]
      if (inForce.length === 0) c.unsure([seq], `no policy record before seq ${seq}: witness registration and class not verified`)
      const now = Date.parse(event.at)
      const verdicts = policies.map((policy) => judgeAttestation(before, p, event.envelope, registryOf(policy), now))
      const accepted = verdicts.some((v) => v.disposition === "accepted")
      if (!accepted) {
        const v = verdicts[0]!
        const claimed = inForce.length === 0 ? [] : ctx.policy.around(event.at).filter((e) => judgeAttestation(before, p, event.envelope, registryOf(e.policy), now).disposition === "accepted")
        c.fail([seq], claimed.length > 0
          ? `backdated approval: ${p.principal}'s approval claims ${event.at}, under epoch ${claimed.map((e) => e.epoch).join(", ")}, but it is stored at seq ${seq}, where epoch ${inForce.map((e) => e.epoch).join(", ")} is in force and the acceptance rule says ${v.disposition}: ${"reason" in v ? v.reason : ""}`
          : `accepted, but the acceptance rule says ${v.disposition}: ${"reason" in v ? v.reason : ""}`)
      }
    }
    return c.done()
  }
}

/**
 * Approvals a dispatch rested on whose signing key `policy` no longer registers: those that
 * count when each statement's own key is taken as registered but not under the real registry,
 * when the rule held only with them.
 */
const removedKeyApprovals = (f: HeldCallFacts, policy: ActivePolicy, now: number): ReadonlyArray<Evidence> => {
  if (f.verdict !== "REQUIRE_WITNESS" || f.active_rule === null) return []
  const registry = { ...registryOf(policy), now }
  const registered = countingApprovals(f, registry)
  const claimed = countingApprovals(f, { ...registry, keysOf: (p) => f.evidence.filter((e) => e.witness === p).map((e) => e.key) })
  if (!satisfies(f.active_rule, claimed) || satisfies(f.active_rule, registered)) return []
  return claimed.filter((e) => !registered.includes(e))
}
