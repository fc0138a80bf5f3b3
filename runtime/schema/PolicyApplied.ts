import { Schema } from "effect"
import { Envelope } from "./Envelope.js"
import { Profile } from "./Profile.js"

/**
 * A policy epoch as it took effect, on `wk.v1.events._policy` in `WK_EVENTS` (not a held-call
 * event). The sequence of these records is the principal registry's history: an auditor
 * rebuilds the registry in force at any time from them alone.
 */
/**
 * What made an epoch: the admin's signed `policy.apply` applied at once (`envelope`, a
 * narrowing), or the witnessed `kernel_policy_apply` call that ran (`held_id`). Absent: the
 * profile files at start-up (or a kernel that did not record it).
 */
/**
 * The signatures that authorized a witnessed change, copied into its record so the record is
 * evidence on its own: the admin's signed proposal of the generation that ran (with what derives
 * its held id and digest) and every accepted approval of that generation.
 */
export const WitnessedSignatures = Schema.Struct({
  generation: Schema.Int,
  call_digest: Schema.String,
  held_id_salt: Schema.optional(Schema.String),
  proposal: Envelope,
  approvals: Schema.Array(Envelope)
})
export type WitnessedSignatures = typeof WitnessedSignatures.Type

export const AppliedBy = Schema.Union(
  Schema.Struct({ envelope: Envelope }),
  Schema.Struct({ held_id: Schema.String, signatures: Schema.optional(WitnessedSignatures) })
)
export type AppliedBy = typeof AppliedBy.Type

export const PolicyApplied = Schema.Struct({
  type: Schema.Literal("policy.applied"),
  event_id: Schema.String,
  epoch: Schema.Int,
  profiles: Schema.Array(Profile),
  at: Schema.String,
  applied_by: Schema.optional(AppliedBy)
})
export type PolicyApplied = typeof PolicyApplied.Type

/** The message id (and event id) of an epoch's record: one record per epoch. */
export const policyAppliedId = (epoch: number): string => `policy.applied:e${epoch}`
