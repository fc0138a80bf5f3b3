import { Schema } from "effect"

/** The checks a replay runs, by the names reports and tests use. */
export const CheckName = Schema.Literal(
  "registry",
  "stream",
  "archive",
  "commit-chain",
  "checkpoints",
  "store-time",
  "signatures",
  "transform-output",
  "attestation-binding",
  "effect-safety",
  "consistency",
  "policy-authority",
  "policy-route",
  "standing",
  "delivery",
  "projection",
  "plugin-pins",
  "plugin-rerun",
  "bearer-tokens"
)
export type CheckName = typeof CheckName.Type

/** One broken promise: which check, which held call, which stream sequences, and why. */
export const Violation = Schema.Struct({
  check: CheckName,
  held_id: Schema.String,
  seqs: Schema.Array(Schema.Int),
  message: Schema.String
})
export type Violation = typeof Violation.Type

/**
 * passed: checked and held. failed: at least one violation. skipped: not run (not asked for,
 * or what it needs cannot be read; `note` says which). pending: ran, but depends on work that
 * is still outstanding or on an interface not yet available.
 */
export const CheckStatus = Schema.Literal("passed", "failed", "skipped", "pending")
export type CheckStatus = typeof CheckStatus.Type

/** The outcome of one check over the whole replay. */
export const CheckResult = Schema.Struct({
  name: CheckName,
  status: CheckStatus,
  /** How many items (envelopes, attestations, dispatches, calls, decisions) it looked at. */
  checked: Schema.Int,
  violations: Schema.Array(Violation),
  /** Things it could not decide, by held id, with the reason (not violations). */
  unverified: Schema.Array(Schema.Struct({ held_id: Schema.String, seqs: Schema.Array(Schema.Int), message: Schema.String })),
  note: Schema.optional(Schema.String)
})
export type CheckResult = typeof CheckResult.Type

/** How the KV projection compared with the re-fold. */
export const ProjectionSummary = Schema.Struct({
  matched: Schema.Int,
  mismatched: Schema.Int,
  /** The projection folded fewer events than the stream holds: behind, not wrong. */
  lagging: Schema.Int,
  /** The projection folded past what this replay read (the kernel kept appending). */
  ahead: Schema.Int,
  /** No projection for a call that has events. */
  missing: Schema.Int
})
export type ProjectionSummary = typeof ProjectionSummary.Type

/** The machine report of `wk audit replay --json`. */
export const AuditReport = Schema.Struct({
  ok: Schema.Boolean,
  stream: Schema.String,
  /** What was selected: a start sequence, a start time, or one held call. */
  selection: Schema.Struct({ from_seq: Schema.optional(Schema.Int), since: Schema.optional(Schema.String), held: Schema.optional(Schema.String) }),
  first_seq: Schema.Int,
  last_seq: Schema.Int,
  /** Messages read in the selected range (commits of held-call events, policy and archive records). */
  events: Schema.Int,
  /** Earlier commits of the selected calls read to fold them from their start. */
  backfilled: Schema.Int,
  /** Commits of selected calls read from archives (their sequences left the stream). */
  archived: Schema.optional(Schema.Int),
  held_calls: Schema.Int,
  /** Epochs whose records verify from the trust anchor (the registry the checks used). */
  policy_epochs: Schema.Array(Schema.Int),
  /** Whether the principal registry derives from a trust root given out of band (`--trust`), not from the first policy record as found. */
  registry_rooted: Schema.Boolean,
  /** What the registry was derived from, in one line (UNANCHORED without a trust root). */
  registry_origin: Schema.String,
  /**
   * Whether the stream's checkpoint chain was required to hold checkpoints kept outside the
   * stream (`--anchor`, `--checkpoint`) and held them: a whole-stream replay with `checkpoints` passed.
   */
  checkpoints_anchored: Schema.Boolean,
  duration_ms: Schema.Number,
  events_per_second: Schema.Number,
  checks: Schema.Array(CheckResult),
  projection: Schema.NullOr(ProjectionSummary),
  violations: Schema.Int
})
export type AuditReport = typeof AuditReport.Type
