import { Schema } from "effect"
import { Profile } from "./Profile.js"

/**
 * A policy epoch as it took effect, on `wk.v1.events._policy` in `WK_EVENTS` (not a held-call
 * event). The sequence of these records is the principal registry's history: an auditor
 * rebuilds the registry in force at any time from them alone.
 */
export const PolicyApplied = Schema.Struct({
  type: Schema.Literal("policy.applied"),
  event_id: Schema.String,
  epoch: Schema.Int,
  profiles: Schema.Array(Profile),
  at: Schema.String
})
export type PolicyApplied = typeof PolicyApplied.Type

/** The message id (and event id) of an epoch's record: one record per epoch. */
export const policyAppliedId = (epoch: number): string => `policy.applied:e${epoch}`
