import { Schema } from "effect"
import { Digest, HeldId, Principal, Timestamp } from "./Ids.js"
import { MaxAttestReasonLength, type AttestPayload } from "./Requests.js"

/** One held call a batch attestation is bound to: its own generation and digests. */
export const BatchItem = Schema.Struct({
  held_id: HeldId,
  generation: Schema.Int.pipe(Schema.positive()),
  call_digest: Digest,
  contract_digest: Digest,
  presentation_digest: Schema.optional(Digest)
})
export type BatchItem = typeof BatchItem.Type

/** Most held calls one batch attestation may name. */
export const MaxBatchItems = 100

/**
 * `wk.v1.held.attest_batch`: one signed attestation that approves (or rejects) several held
 * calls, each item bound to its own generation and digests. `mode`: `all` (every item must be
 * accepted when checked, or none is recorded) or `each` (each item on its own).
 */
export const AttestBatchPayload = Schema.Struct({
  op: Schema.Literal("attest_batch"),
  principal: Principal,
  class: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
  decision: Schema.Literal("approve", "reject"),
  mode: Schema.Literal("all", "each"),
  items: Schema.Array(BatchItem).pipe(Schema.minItems(1), Schema.maxItems(MaxBatchItems)),
  reason: Schema.optional(Schema.String.pipe(Schema.maxLength(MaxAttestReasonLength))),
  issued_at: Timestamp,
  expires_at: Timestamp,
  nonce: Schema.String.pipe(Schema.minLength(8), Schema.maxLength(128))
})
export type AttestBatchPayload = typeof AttestBatchPayload.Type

/**
 * The attestation a batch makes about one of its calls: exactly what a single attestation of
 * that item would say (`op: "attest"`), so the kernel and the auditor judge and record it with the
 * same rule. Undefined when the batch does not name the call (or names it twice).
 */
export const attestationOfBatch = (b: AttestBatchPayload, heldId: string): AttestPayload | undefined => {
  const items = b.items.filter((i) => i.held_id === heldId)
  const item = items[0]
  if (item === undefined || items.length > 1) return undefined
  return {
    op: "attest",
    principal: b.principal,
    class: b.class,
    held_id: item.held_id,
    generation: item.generation,
    call_digest: item.call_digest,
    contract_digest: item.contract_digest,
    decision: b.decision,
    ...(item.presentation_digest !== undefined ? { presentation_digest: item.presentation_digest } : {}),
    ...(b.reason !== undefined ? { reason: b.reason } : {}),
    issued_at: b.issued_at,
    expires_at: b.expires_at,
    nonce: b.nonce
  }
}
