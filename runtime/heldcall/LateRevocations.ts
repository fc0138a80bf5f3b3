import type { Evidence, HeldCallFacts } from "../schema/Facts.js"

/**
 * A witness's revocation of its own approval that arrived after the call it approved was
 * released: too late to stop the effect (invariant 2 holds only before dispatch), recorded as a
 * stale attestation, and made known: the proposer's session and the routes are told
 * (protocol/LateRevocationNotice.ts), and `held.get`, `wk held show` and the inbox list it.
 */
export interface LateRevocation {
  readonly witness: string
  readonly class: string
  readonly generation: number
  readonly call_digest: string
  /** When the witness signed the revocation. */
  readonly issued_at: string
  /** The digest of the signed revocation, as recorded. */
  readonly attestation_digest: string
}

// The kernel's reason for a revoke that came after the call left the open, undispatched state.
const tooLate = (e: Evidence): boolean => e.reason !== undefined && /^stale: the call (was already dispatched|is )/.test(e.reason)

/**
 * The revocations after release a call's facts hold: a signed, stale revoke of a generation whose
 * effect was dispatched, by a witness with an approval of that same generation and call digest
 * (a witness can only withdraw its own word; a revoke of a call it never approved is not one).
 * Pure: the auditor's re-fold gives the same list.
 */
export const lateRevocationsOf = (f: HeldCallFacts): ReadonlyArray<LateRevocation> => {
  if (f.execution === "none" || f.execution === "leased") return []
  const out: Array<LateRevocation> = []
  for (const e of f.evidence) {
    if (e.decision !== "revoke" || e.status !== "rejected" || !tooLate(e)) continue
    const approved = f.evidence.some((a) => a.witness === e.witness && a.decision === "approve" && a.status !== "rejected" && a.generation === e.generation && a.call_digest === e.call_digest)
    if (!approved || out.some((r) => r.witness === e.witness && r.generation === e.generation)) continue
    out.push({ witness: e.witness, class: e.class, generation: e.generation, call_digest: e.call_digest, issued_at: e.issued_at, attestation_digest: e.attestation_digest })
  }
  return out
}
