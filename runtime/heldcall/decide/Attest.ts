import type { Envelope } from "../../schema/Envelope.js"
import type { EventOf } from "../../schema/Events.js"
import type { HeldCallFacts } from "../../schema/Facts.js"
import type { AttestPayload } from "../../schema/Requests.js"
import { notFound, type Reply } from "../../schema/Reply.js"
import { jcsDigest } from "../../schema/Canonical.js"
import { routeAdmits } from "../../schema/WitnessContract.js"
import { currentPresentationDigest, finalNoOf, sharedNamespace, type WitnessRegistry } from "../Counting.js"
import { EventIds } from "../EventIds.js"
import { beforeDispatch, canonicalCall } from "../Facts.js"
import { admittedWitnesses } from "../Reconciler.js"
import { answer, atOf, SkewMs, type DecideContext, type Decision } from "./Decision.js"

/** `wk.v1.held.attest`: a witness's signed statement about one generation of a call. */
export interface Attest {
  readonly _tag: "Attest"
  readonly payload: AttestPayload
  readonly envelope: Envelope
}

/** How an attestation is judged: it counts, or it is recorded as stale or invalid with why. */
export type AttestationVerdict = { readonly disposition: "accepted" } | { readonly disposition: "stale" | "invalid"; readonly reason: string }

/**
 * Invariants 3 and 4: an attestation counts only if it is bound to this call's held id,
 * generation, call digest, contract digest and (when it names one) the presentation shown now,
 * is unexpired, not issued in the future beyond the skew, unreplayed, from a registered witness
 * of a class the contract admits, independent of the proposer, and no approval after that
 * witness's own reject or revoke of the generation. The auditor applies the same rule.
 */
export const judgeAttestation = (f: HeldCallFacts, p: AttestPayload, env: Envelope, registry: WitnessRegistry, now: number): AttestationVerdict => {
  const spec = f.spec!
  if (f.lifecycle !== "open") return { disposition: "stale", reason: `the call is ${f.lifecycle}` }
  if (!beforeDispatch(f)) return { disposition: "stale", reason: "the call was already dispatched" }
  if (p.generation !== f.generation) return { disposition: "stale", reason: `bound to generation ${p.generation}; the current generation is ${f.generation}` }
  if (p.call_digest !== canonicalCall(f)?.call_digest) return { disposition: "stale", reason: "bound to another call digest" }
  if (f.verdict !== "REQUIRE_WITNESS" || f.witness_contract === null) return { disposition: "stale", reason: "the call is not waiting for a witness" }
  if (p.contract_digest !== f.contract_digest) return { disposition: "invalid", reason: "contract mismatch: bound to another witness contract" }
  if (p.presentation_digest !== undefined && p.presentation_digest !== currentPresentationDigest(f)) {
    return { disposition: "stale", reason: "bound to another presentation: the call is shown differently now; read it again" }
  }
  if (Date.parse(p.expires_at) <= now) return { disposition: "invalid", reason: `attestation expired at ${p.expires_at}` }
  if (Date.parse(p.issued_at) > now + SkewMs) return { disposition: "invalid", reason: `issued_at ${p.issued_at} is more than ${SkewMs / 1000} s in the future (the allowed clock skew)` }
  if (p.principal === spec.principal) return { disposition: "invalid", reason: "witness is not independent of the proposer: same principal" }
  if (registry.keysOf(spec.principal).includes(env.key)) return { disposition: "invalid", reason: "witness is not independent of the proposer: the proposer's key" }
  const shared = sharedNamespace(registry, p.principal, spec.principal, spec.session_id)
  if (shared !== undefined) return { disposition: "invalid", reason: `witness is not independent of the proposer: it acts in the proposer's session namespace '${shared}'` }
  const classes = registry.classesOf(p.principal)
  if (!classes.includes(p.class)) return { disposition: "invalid", reason: `principal '${p.principal}' is not registered with class '${p.class}'` }
  if (p.decision === "evidence") {
    // Evidence answers one of the contract's evidence terms, from a witness that term admits (not the rule's approvers).
    const record = p.evidence
    if (record === undefined) return { disposition: "invalid", reason: "decision evidence needs payload.evidence naming one of the contract's evidence terms" }
    const term = (f.witness_contract.evidence ?? []).find((t) => t.name === record.term)
    if (term === undefined) return { disposition: "invalid", reason: `the contract has no evidence term '${record.term}'` }
    if (term.kind !== record.kind) return { disposition: "invalid", reason: `evidence term '${term.name}' needs evidence of kind '${term.kind}', not '${record.kind}'` }
    if (!routeAdmits(term.by, p.principal, classes)) return { disposition: "invalid", reason: `principal '${p.principal}' may not supply evidence for term '${term.name}'` }
  } else if (p.evidence !== undefined) {
    return { disposition: "invalid", reason: "payload.evidence goes only with decision evidence" }
  } else {
    const admitted = admittedWitnesses(f.witness_contract)
    if (!admitted.classes.includes(p.class) && !admitted.principals.includes(p.principal)) {
      return { disposition: "invalid", reason: `wrong class: the contract does not accept class '${p.class}' or principal '${p.principal}'` }
    }
  }
  const route = f.witness_contract.route
  if (p.decision === "approve" && route !== undefined && !routeAdmits(route, p.principal, classes)) {
    return { disposition: "invalid", reason: `principal '${p.principal}' is not on the contract's witness route` }
  }
  if (f.evidence.some((e) => e.witness === p.principal && e.nonce === p.nonce)) return { disposition: "invalid", reason: "nonce already used by this witness on this call (replay)" }
  const final = p.decision === "approve" || p.decision === "evidence" ? finalNoOf(f, p.principal) : undefined
  if (final !== undefined) {
    const did = final === "reject" ? "rejected" : final === "revoke" ? "revoked its approval of" : "failed a nested call it attached to"
    return { disposition: "invalid", reason: `this witness already ${did} generation ${f.generation}; that is final for the generation` }
  }
  return { disposition: "accepted" }
}

const replyFor = (v: AttestationVerdict): Reply =>
  v.disposition === "accepted" ? { status: 202, disposition: "accepted" } : { status: v.disposition === "stale" ? 409 : 422, disposition: v.disposition, reason: v.reason }

/**
 * Records the attestation either way: `attestation.accepted` (202, and the call is driven: it may
 * now be ready) or `attestation.rejected` (409 stale, 422 invalid). The same signed bytes again
 * are a duplicate: accepted before, 200 and the call is driven again from a fresh read (the
 * process that recorded it may have stopped before it drove the call); rejected before, the
 * verdict again and nothing written.
 */
export const decideAttest = (f: HeldCallFacts, { payload: p, envelope }: Attest, ctx: DecideContext): Decision => {
  if (f.spec === null) return answer(notFound(f.held_id))
  const digest = jcsDigest(p)
  const acceptedId = EventIds.attestationAccepted(f.held_id, digest)
  if (f.seen.includes(acceptedId)) return { reply: { status: 200, disposition: "duplicate" }, events: [], drive: "fresh" }
  const v = judgeAttestation(f, p, envelope, ctx, ctx.now)
  const rejectedId = EventIds.attestationRejected(f.held_id, digest)
  if (f.seen.includes(rejectedId)) return answer(replyFor(v))
  const base = { held_id: f.held_id, at: atOf(ctx), witness: p.principal, class: p.class, attestation_digest: digest, envelope }
  if (v.disposition !== "accepted") {
    const rejected: EventOf<"attestation.rejected"> = { ...base, generation: f.generation, type: "attestation.rejected", event_id: rejectedId, disposition: v.disposition, reason: v.reason }
    return { reply: replyFor(v), events: [rejected] }
  }
  const accepted: EventOf<"attestation.accepted"> = {
    ...base,
    generation: p.generation,
    type: "attestation.accepted",
    event_id: acceptedId,
    decision: p.decision,
    call_digest: p.call_digest,
    contract_digest: p.contract_digest,
    issued_at: p.issued_at,
    expires_at: p.expires_at,
    nonce: p.nonce,
    ...(p.evidence_digest !== undefined ? { evidence_digest: p.evidence_digest } : {}),
    ...(p.evidence !== undefined ? { evidence: p.evidence } : {}),
    ...(p.presentation_digest !== undefined ? { presentation_digest: p.presentation_digest } : {}),
    ...(p.reason !== undefined ? { reason: p.reason } : {})
  }
  return { reply: replyFor(v), events: [accepted], drive: "cached" }
}
