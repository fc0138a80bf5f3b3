import { Schema } from "effect"
import { HeldId, Digest, Principal, SessionId, Token, ToolName, Timestamp } from "./Ids.js"
import { Envelope } from "./Envelope.js"
import { JsonObject, JsonValue } from "./Json.js"
import { CallPreferences } from "./Preferences.js"
import { EvidenceRecord } from "./EvidenceTerm.js"
import { OnBehalfOf } from "./IdentityBinding.js"
import { ContinuationDigest } from "./Continuation.js"

export { CallPreferences } from "./Preferences.js"

export const ProposePayload = Schema.Struct({
  op: Schema.Literal("propose"),
  principal: Principal,
  session_id: SessionId,
  turn_id: Token,
  call_id: Token,
  tool: ToolName,
  args: JsonObject,
  continuation_ref: Schema.optional(Schema.String.pipe(Schema.maxLength(4096))),
  /** The sha256 of a continuation the request carries beside its envelope, kept by the kernel and returned with the delivery (Continuation.ts). */
  continuation_digest: Schema.optional(ContinuationDigest),
  preferences: Schema.optional(CallPreferences),
  /** Proposes this call as a dependency of an open held call (nested hold): the parent waits for it to end. */
  parent_held_id: Schema.optional(HeldId),
  /**
   * Optional (v1 clients send none): makes every envelope unique, so the same payload signed twice
   * is two requests and the same envelope sent twice is one; an envelope whose nonce an earlier
   * proposal of this call used is refused once the call has moved on.
   */
  nonce: Schema.optional(Schema.String.pipe(Schema.minLength(8), Schema.maxLength(128))),
  /** Optional: after this time the envelope is refused; at most `MaxProposeTtlMs` ahead of the kernel's clock. */
  expires_at: Schema.optional(Timestamp),
  /**
   * An edit: the generation of this call it replaces (the `generation` of its last held reply).
   * Without it an edit is still accepted unless its call digest is an earlier generation's (a replay).
   */
  supersedes: Schema.optional(Schema.Int.pipe(Schema.positive())),
  /**
   * The bearer token the MCP endpoint verified before it signed this proposal as the principal
   * its identity binding names (schema/IdentityBinding.ts): recorded with the envelope, checked
   * against the bindings in force (runtime/policy/IdentityBindings.ts).
   */
  on_behalf_of: Schema.optional(OnBehalfOf)
})
export type ProposePayload = typeof ProposePayload.Type

/** How far ahead a propose envelope's `expires_at` may lie: a captured envelope is useless after this. */
export const MaxProposeTtlMs = 15 * 60_000

/**
 * A proposal as the kernel records it. A `policy.apply` widening is recorded as a proposal of
 * `kernel_policy_apply` built by the kernel from the admin's signed request.
 */
export type ProposeCall = ProposePayload

export const AttestDecision = Schema.Literal("approve", "reject", "revoke", "evidence")
export type AttestDecision = typeof AttestDecision.Type

/** Longest `reason` a witness may give with an attestation. */
export const MaxAttestReasonLength = 500

export const AttestPayload = Schema.Struct({
  op: Schema.Literal("attest"),
  principal: Principal,
  class: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
  held_id: HeldId,
  generation: Schema.Int.pipe(Schema.positive()),
  call_digest: Digest,
  contract_digest: Digest,
  decision: AttestDecision,
  evidence_digest: Schema.optional(Digest),
  /** With `decision: "evidence"`: what the witness (a verifier, a CI) read for one of the contract's evidence terms. */
  evidence: Schema.optional(EvidenceRecord),
  /** `sha256(JCS(presentation))` of the presentation the witness was shown; it must be the call's current one. */
  presentation_digest: Schema.optional(Digest),
  /** Why the witness decided so; shown to the agent and in the inbox. Signed with the rest. */
  reason: Schema.optional(Schema.String.pipe(Schema.maxLength(MaxAttestReasonLength))),
  issued_at: Timestamp,
  expires_at: Timestamp,
  nonce: Schema.String.pipe(Schema.minLength(8), Schema.maxLength(128))
})
export type AttestPayload = typeof AttestPayload.Type

/**
 * `wk.v1.held.edit`: a witness the contract admits proposes changed arguments for the call it
 * was asked about (bound like an attestation to the generation, call and contract it was shown).
 * The edit becomes the next generation, adjudicated from the start; it approves nothing.
 */
export const EditPayload = Schema.Struct({
  op: Schema.Literal("edit"),
  principal: Principal,
  class: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
  held_id: HeldId,
  generation: Schema.Int.pipe(Schema.positive()),
  call_digest: Digest,
  contract_digest: Digest,
  /** The arguments the witness would approve instead (the tool stays the same). */
  args: JsonObject,
  reason: Schema.optional(Schema.String.pipe(Schema.maxLength(MaxAttestReasonLength))),
  issued_at: Timestamp,
  expires_at: Timestamp,
  nonce: Schema.String.pipe(Schema.minLength(8), Schema.maxLength(128))
})
export type EditPayload = typeof EditPayload.Type

/**
 * `wk.v1.held.extend`: a witness the contract admits moves a held call's expiry later, to
 * `extend_to` (at most the policy's hold time from now), bound like an attestation to what it
 * was shown. It approves nothing.
 */
export const ExtendPayload = Schema.Struct({
  op: Schema.Literal("extend"),
  principal: Principal,
  class: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
  held_id: HeldId,
  generation: Schema.Int.pipe(Schema.positive()),
  call_digest: Digest,
  contract_digest: Digest,
  extend_to: Timestamp,
  reason: Schema.optional(Schema.String.pipe(Schema.maxLength(MaxAttestReasonLength))),
  issued_at: Timestamp,
  expires_at: Timestamp,
  nonce: Schema.String.pipe(Schema.minLength(8), Schema.maxLength(128))
})
export type ExtendPayload = typeof ExtendPayload.Type

/**
 * A read-back attestation (from a witness the contract or the tool's rule names) or an admin's
 * determination of whether the effect of a call whose outcome is unknown happened.
 */
export const SettlePayload = Schema.Struct({
  op: Schema.Literal("settle"),
  principal: Principal,
  held_id: HeldId,
  generation: Schema.Int.pipe(Schema.positive()),
  call_digest: Digest,
  decision: Schema.Literal("effect_happened", "no_effect"),
  /** What the signer read back from the system of record when the effect happened. */
  result: Schema.optional(JsonValue),
  reason: Schema.optional(Schema.String.pipe(Schema.maxLength(MaxAttestReasonLength))),
  issued_at: Timestamp,
  expires_at: Timestamp,
  nonce: Schema.String.pipe(Schema.minLength(8), Schema.maxLength(128))
})
export type SettlePayload = typeof SettlePayload.Type

export const CancelPayload = Schema.Struct({
  op: Schema.Literal("cancel"),
  principal: Principal,
  held_id: HeldId,
  reason: Schema.String.pipe(Schema.maxLength(1000))
})
export type CancelPayload = typeof CancelPayload.Type

export const AckPayload = Schema.Struct({
  op: Schema.Literal("ack"),
  principal: Principal,
  held_id: HeldId,
  delivery_id: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))
})
export type AckPayload = typeof AckPayload.Type

export const PolicyApplyPayload = Schema.Struct({
  op: Schema.Literal("policy.apply"),
  principal: Principal,
  profile: JsonObject,
  /**
   * Optional (v1 clients send none), as for propose: a fresh value per envelope. The same
   * principal's nonce seen again while its envelope is unexpired is a duplicate: the answer of
   * the first apply, nothing changes.
   */
  nonce: Schema.optional(Schema.String.pipe(Schema.minLength(8), Schema.maxLength(128))),
  /** Optional: after this time the envelope is refused; at most `MaxProposeTtlMs` ahead. */
  expires_at: Schema.optional(Timestamp)
})
export type PolicyApplyPayload = typeof PolicyApplyPayload.Type

/**
 * The signed part of a read (`op: "read"`): who reads, when, a fresh nonce, and what it reads:
 * over NATS `path` is the subject (and `held_id` the call of a `held.get`), through the gateway
 * `method` and `path` are the HTTP request's. The kernel answers it only for the read it names,
 * once (protocol/ReadProof.ts), with a registered key and a valid signature, while `issued_at` is recent.
 */
export const ReadPayload = Schema.Struct({
  op: Schema.Literal("read"),
  principal: Principal,
  issued_at: Timestamp,
  nonce: Schema.String.pipe(Schema.minLength(8), Schema.maxLength(128), Schema.pattern(/^[A-Za-z0-9_-]+$/)),
  method: Schema.optional(Schema.String.pipe(Schema.maxLength(16))),
  path: Schema.optional(Schema.String.pipe(Schema.maxLength(2048))),
  held_id: Schema.optional(HeldId)
})
export type ReadPayload = typeof ReadPayload.Type

/** `held.get`: unsigned (the view the caller's login may read: protocol/Get.ts), or with `reader`, a signed read (the reader's own view). */
export const GetRequest = Schema.Struct({ held_id: HeldId, reader: Schema.optional(Envelope) })
export type GetRequest = typeof GetRequest.Type

/**
 * A request whose only field is a signed read: `wk.v1.health` (any registered principal may see
 * the kernels' health) and `wk.v1.grants.get` (the tools the reader is granted).
 */
export const ReaderRequest = Schema.Struct({ reader: Envelope })
export type ReaderRequest = typeof ReaderRequest.Type

