/**
 * Every event id the kernel writes, built from the event's cause. The same cause always gives the
 * same id: that is what makes a repeated write one event (the reducer folds an id once, JetStream
 * deduplicates it) and what the auditor checks. An id names its held call and what caused it
 * (a generation, a digest of a signed statement, an attempt, a child call), never a time.
 */
export const EventIds = {
  /** A proposal (or an edit) of `generation`. */
  proposed: (heldId: string, generation: number) => `call.proposed:${heldId}:g${generation}`,
  /** The same proposal presented again as `generation`. */
  represented: (heldId: string, generation: number) => `call.represented:${heldId}:g${generation}`,
  adjudicated: (heldId: string, generation: number, policyEpoch: number) => `call.adjudicated:${heldId}:g${generation}:e${policyEpoch}`,
  held: (heldId: string, generation: number, contractDigest: string, presentationDigest: string) => `call.held:${heldId}:g${generation}:${contractDigest}:${presentationDigest}`,
  /** The verdict's denial of `generation` (the adjudicator's, or a refused nested call's). */
  denied: (heldId: string, generation: number) => `call.denied:${heldId}:g${generation}`,
  /** One cancel per call, whoever asks and however often. */
  cancelled: (heldId: string) => `call.cancelled:${heldId}`,
  /** A signed attestation, by the digest of its payload. */
  edited: (heldId: string, editDigest: string) => `call.edited:${heldId}:${editDigest}`,
  extended: (heldId: string, extendDigest: string) => `call.extended:${heldId}:${extendDigest}`,
  reminded: (heldId: string, generation: number, expiresAt: string) => `witness.reminded:${heldId}:g${generation}:${expiresAt}`,
  /** A standing approval applied to a generation under a contract (one per grant, generation and contract). */
  standingApplied: (heldId: string, generation: number, grantId: string, contractDigest: string) => `standing.applied:${heldId}:g${generation}:${grantId}:${contractDigest}`,
  attestationAccepted: (heldId: string, attestationDigest: string) => `attestation.accepted:${heldId}:${attestationDigest}`,
  attestationRejected: (heldId: string, attestationDigest: string) => `attestation.rejected:${heldId}:${attestationDigest}`,
  /** A signed settlement of an unknown outcome, by the digest of its payload. */
  settled: (heldId: string, settlementDigest: string) => `effect.settled:${heldId}:${settlementDigest}`,
  policyEpochChanged: (heldId: string, policyEpoch: number) => `policy.epoch_changed:${heldId}:e${policyEpoch}`,
  /** Edges of nested calls: one per (parent, child). */
  dependencyAdded: (parentId: string, childId: string) => `dependency.added:${parentId}:${childId}`,
  dependencyRefused: (parentId: string, childId: string) => `dependency.refused:${parentId}:${childId}`,
  /** A child's end on its parent: one per edge, however often it is reported. */
  dependencyResolved: (parentId: string, childId: string) => `dependency.resolved:${parentId}:${childId}`,
  /** On the child: its end was recorded on its parent. */
  dependencyReported: (childId: string, parentId: string) => `dependency.reported:${childId}:${parentId}`,
  deliveryPublished: (heldId: string, deliveryId: string, attempt: number) => `delivery.published:${heldId}:${deliveryId}:a${attempt}`,
  deliveryAcknowledged: (heldId: string, deliveryId: string) => `delivery.acknowledged:${heldId}:${deliveryId}`,
  deliveryStopped: (heldId: string, deliveryId: string) => `delivery.stopped:${heldId}:${deliveryId}`,
  resultAdmitted: (heldId: string, generation: number) => `result.admitted:${heldId}:g${generation}`,
  resultQuarantined: (heldId: string, generation: number) => `result.quarantined:${heldId}:g${generation}`,
  /** Execution, by idempotency key and dispatch attempt. */
  leased: (heldId: string, key: string, attempt: number, owner: string, leaseUntil: string) => `execution.leased:${heldId}:${key}:a${attempt}:${owner}:${leaseUntil}`,
  dispatched: (heldId: string, key: string, attempt: number) => `effect.dispatched:${heldId}:${key}:a${attempt}`,
  unreached: (heldId: string, key: string, attempt: number) => `effect.unreached:${heldId}:${key}:a${attempt}`,
  /** `witness`: the unknown outcome waits for a read-back witness (a second cause on the same attempt). */
  outcomeUnknown: (heldId: string, key: string, attempt: number, witness = false) => `effect.outcome_unknown:${heldId}:${key}:a${attempt}${witness ? ":witness" : ""}`,
  resend: (heldId: string, key: string, attempt: number) => `effect.resend:${heldId}:${key}:a${attempt}`,
  readback: (heldId: string, key: string, attempt: number) => `effect.readback:${heldId}:${key}:a${attempt}`,
  readbackUnreached: (heldId: string, key: string, attempt: number, readbacks: number) => `effect.readback_unreached:${heldId}:${key}:a${attempt}:r${readbacks}`,
  recorded: (heldId: string, key: string) => `effect.recorded:${heldId}:${key}`,
  /** A local fact the reconciler derived: the `step`-th derivation on top of stream sequence `seq`. */
  derived: (type: string, heldId: string, seq: number, step: number) => `${type}:${heldId}:@${seq}.${step}`,
  boundExceeded: (heldId: string, seq: number) => `reconcile.bound_exceeded:${heldId}:@${seq}`
} as const

/** The id of the delivery of a call's result for its current generation (what an ack names). */
export const deliveryIdOf = (f: { readonly held_id: string; readonly generation: number }): string => `d_${f.held_id}_g${f.generation}`
