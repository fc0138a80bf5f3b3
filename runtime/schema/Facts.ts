import { Schema } from "effect"
import { JsonObject, JsonValue } from "./Json.js"
import { Readiness, Reason, Verdict, WitnessRequest } from "./Events.js"
import { WitnessContract, WitnessRule } from "./WitnessContract.js"
import { HeldCallSpec } from "./HeldCallSpec.js"
import { EvidenceRecord } from "./EvidenceTerm.js"

/** The immutable spec of one generation (its own module so events and facts share it). */
export { HeldCallSpec } from "./HeldCallSpec.js"

/**
 * open: may still run or end. completed: the effect ran and its result was admitted or quarantined.
 * denied / cancelled / expired: ended with no effect.
 */
export const Lifecycle = Schema.Literal("open", "completed", "denied", "cancelled", "expired")
export type Lifecycle = typeof Lifecycle.Type

/**
 * none: nothing dispatched. leased: a worker holds the effect lease. dispatched: the tool was
 * called and no record exists yet. effect-recorded: the effect's outcome is in the log.
 * outcome-unknown: a dispatch whose record was lost; only read-back or a witness resolves it.
 */
export const Execution = Schema.Literal("none", "leased", "dispatched", "effect-recorded", "outcome-unknown")
export type Execution = typeof Execution.Type

export const ResultAdmission = Schema.Literal("pending", "admitted", "quarantined")
export const ContinuationDelivery = Schema.Literal("none", "pending", "delivered", "acknowledged")
export type ContinuationDelivery = typeof ContinuationDelivery.Type

export const EvidenceStatus = Schema.Literal("pending", "valid", "rejected", "revoked")

/**
 * One witness statement about one generation. `reason`: the witness's own reason for a valid
 * statement, the kernel's reason for a rejected one. `key`: the public key that signed it, which
 * must still be registered to the witness for the statement to count.
 */
export const Evidence = Schema.Struct({
  witness: Schema.String,
  class: Schema.String,
  decision: Schema.Literal("approve", "reject", "revoke", "evidence"),
  status: EvidenceStatus,
  reason: Schema.optional(Schema.String),
  key: Schema.String,
  presentation_digest: Schema.optional(Schema.String),
  /** What an `evidence` statement read, for the contract's evidence terms. */
  record: Schema.optional(EvidenceRecord),
  generation: Schema.Int,
  call_digest: Schema.String,
  contract_digest: Schema.String,
  attestation_digest: Schema.String,
  issued_at: Schema.String,
  expires_at: Schema.String,
  nonce: Schema.String,
  /** The standing approval this evidence came from (StandingGrant.ts), when it is one. */
  standing: Schema.optional(Schema.String)
})
export type Evidence = typeof Evidence.Type

export const Outcome = Schema.Literal("completed", "denied", "cancelled", "expired")
export type Outcome = typeof Outcome.Type

/**
 * pending: the parent waits for this nested held call. resolved: it ended (`outcome`).
 * refused: the kernel refused the edge (cycle, depth over the bound); `reason` says why.
 * `attached_by`: the principal that proposed the child, and `generation` the parent's generation
 * then; a failed child of a witness counts as that witness's reject of that generation only
 * (absent in older projections: the child counts as the proposer's).
 */
export const Dependency = Schema.Struct({
  held_id: Schema.String,
  status: Schema.Literal("pending", "resolved", "refused"),
  outcome: Schema.optional(Outcome),
  reason: Schema.optional(Schema.String),
  attached_by: Schema.optional(Schema.String),
  generation: Schema.optional(Schema.Int)
})
export type Dependency = typeof Dependency.Type

/** Observed facts of a held call (the seed's `HeldCallStatus`), derived from its events only. */
export const HeldCallFacts = Schema.Struct({
  held_id: Schema.String,
  generation: Schema.Int,
  spec: Schema.NullOr(HeldCallSpec),
  lifecycle: Lifecycle,
  verdict: Schema.Literal("pending", ...Verdict.literals),
  reasons: Schema.Array(Reason),
  witness_contract: Schema.NullOr(WitnessContract),
  contract_digest: Schema.NullOr(Schema.String),
  witness_request: Schema.NullOr(WitnessRequest),
  /**
   * The canonical call of this generation, after transforms: what runs, and what witnesses bind
   * to (`call_digest`). Null until adjudicated. Absent in projections of older kernels.
   */
  executed: Schema.optionalWith(Schema.NullOr(Schema.Struct({ tool: Schema.String, args: JsonObject, call_digest: Schema.String })), { default: () => null }),
  /**
   * Set once the kernel re-presented the last proposal (`call.represented`): that proposal's
   * generation; the generations after it up to `generation` present the same proposal. An edit
   * must supersede one of them. Absent: the last proposal is `generation` itself.
   */
  proposed_generation: Schema.optional(Schema.Int),
  /**
   * Call digests of the proposals this call's edits replaced, oldest first: an envelope that
   * proposes one of them again without naming the generation it supersedes is a replay.
   * Absent: never edited.
   */
  earlier_digests: Schema.optional(Schema.Array(Schema.String)),
  /** The rule in force: the contract's rule, or the fallback route after a timeout. */
  active_rule: Schema.NullOr(WitnessRule),
  /** True once a 202 was answered: the end of the call is then delivered to the session. */
  held: Schema.Boolean,
  /** The expiry the witnesses were last reminded of (a reminder goes out once per expiry). */
  reminded_for: Schema.optional(Schema.String),
  evidence: Schema.Array(Evidence),
  readiness: Readiness,
  policy_epoch: Schema.Int,
  policy_epoch_checked: Schema.Int,
  execution: Execution,
  lease_owner: Schema.NullOr(Schema.String),
  /** Until when the claiming worker may still record its effect; recovery waits for it. */
  lease_until: Schema.NullOr(Schema.String),
  dispatch_attempts: Schema.Int,
  needs_witness: Schema.Boolean,
  effect: Schema.NullOr(Schema.Struct({ ok: Schema.Boolean, result: Schema.optional(JsonValue), error: Schema.optional(Schema.String), via: Schema.String })),
  result_admission: ResultAdmission,
  result: Schema.NullOr(JsonValue),
  quarantine: Schema.NullOr(Reason),
  outcome: Schema.NullOr(Outcome),
  continuation_delivery: ContinuationDelivery,
  delivery_id: Schema.NullOr(Schema.String),
  delivery_attempts: Schema.Int,
  delivery_last_at: Schema.NullOr(Schema.String),
  /** When the kernel stopped republishing an unacknowledged delivery (`delivery.stopped`). Absent: it did not. */
  delivery_stopped_at: Schema.optional(Schema.String),
  errors: Schema.Array(Schema.String),
  /** Nested held calls this call waits for, sorted by held id. Absent: none (and in older projections). */
  dependencies: Schema.optional(Schema.Array(Dependency)),
  /** A child's end is recorded on its parent (`dependency.reported`). Absent: not yet, or no parent. */
  parent_reported: Schema.optional(Schema.Boolean),
  /** The last dispatch reached no tool service: how often, why, and when the next attempt may go. Absent: never. */
  unreached: Schema.optional(Schema.Struct({ attempts: Schema.Int, reason: Schema.String, retry_at: Schema.String })),
  /** The last read-back of an unknown outcome reached no tool service: how often, why, and when it may be asked again. Absent: it did not. */
  readback_unreached: Schema.optional(Schema.Struct({ attempts: Schema.Int, reason: Schema.String, retry_at: Schema.String })),
  /** An idempotent tool's unknown outcome is being re-sent under the same key (even past expiry). */
  resend: Schema.optional(Schema.Boolean),
  /** Event ids already folded: the reducer, not the dedupe window, guarantees append-once. */
  seen: Schema.Array(Schema.String),
  last_seq: Schema.Int
})
export type HeldCallFacts = typeof HeldCallFacts.Type
