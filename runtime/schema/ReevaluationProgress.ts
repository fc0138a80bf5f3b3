import { Schema } from "effect"

/**
 * Where the background re-evaluation of open held calls under one policy epoch stands, for one
 * shard (the open calls whose held id hashes to it). Kept in the `wk_policy` bucket under
 * `reevaluation.<epoch>.<shard>`: a kernel that takes the shard over (after a crash or a restart)
 * resumes after `cursor` instead of starting again, and `wk status` sums the shards.
 */
export const ReevaluationProgress = Schema.Struct({
  epoch: Schema.Int,
  shard: Schema.Int,
  shards: Schema.Int,
  /** Open calls of this shard known so far: those done plus those listed after the cursor. */
  total: Schema.Int,
  /** Calls re-evaluated under `epoch` (in held-id order, up to and including `cursor`). */
  done: Schema.Int,
  /** The last held id re-evaluated (ids are walked in ascending order); null before the first. */
  cursor: Schema.NullOr(Schema.String),
  finished: Schema.Boolean,
  /** The kernel process working the shard now (or that finished it). */
  owner: Schema.String,
  /** `done` when this owner took the shard: more than zero means it resumed from the cursor. */
  resumed_from: Schema.Int,
  /** This owner's pace over its work so far. */
  rate_per_s: Schema.Number,
  started_at: Schema.String,
  updated_at: Schema.String
})
export type ReevaluationProgress = typeof ReevaluationProgress.Type

export const ReevaluationKeyPrefix = "reevaluation."

/** The progress record's key in the `wk_policy` bucket. */
export const reevaluationKey = (epoch: number, shard: number): string => `${ReevaluationKeyPrefix}${epoch}.${shard}`

/** The progress of one epoch over all its shards, as `wk status` and a kernel's status report it. */
export interface ReevaluationSummary {
  readonly epoch: number
  readonly shards: number
  readonly shards_finished: number
  readonly done: number
  readonly total: number
  /** Sum of the pace of the shards still being worked. */
  readonly rate_per_s: number
  readonly finished: boolean
  readonly owners: ReadonlyArray<string>
}

/** Sums an epoch's shard records (shards with no record yet count as not started, total unknown: 0). */
export const summarize = (epoch: number, shards: number, records: ReadonlyArray<ReevaluationProgress>): ReevaluationSummary => {
  const mine = records.filter((r) => r.epoch === epoch)
  const finished = mine.filter((r) => r.finished).length
  return {
    epoch,
    shards,
    shards_finished: finished,
    done: mine.reduce((a, r) => a + r.done, 0),
    total: mine.reduce((a, r) => a + Math.max(r.total, r.done), 0),
    rate_per_s: Math.round(mine.filter((r) => !r.finished).reduce((a, r) => a + r.rate_per_s, 0)),
    finished: finished >= shards,
    owners: [...new Set(mine.map((r) => r.owner))].sort()
  }
}
