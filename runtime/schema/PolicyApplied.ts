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
export const AppliedBy = Schema.Union(Schema.Struct({ envelope: Envelope }), Schema.Struct({ held_id: Schema.String }))
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
