/**
 * How the background re-evaluation of open held calls after a policy change is paced and split.
 * The work is cut into `shards` by a hash of the held id; a kernel works a shard under a lease,
 * `concurrency` calls at a time, in batches of `batch`, never faster than `maxRatePerSec`. Between
 * batches it measures how busy its event loop was: above `busyShare` it slows down (multiplicative
 * decrease, down to `minRatePerSec`), below it speeds up again, so request traffic keeps the loop.
 */
export interface ReevaluationPace {
  readonly shards: number
  readonly concurrency: number
  readonly batch: number
  readonly maxRatePerSec: number
  readonly minRatePerSec: number
  /** Event-loop utilization (0..1) above which the loop backs off. */
  readonly busyShare: number
  /** Time-to-live of a shard's lease; renewed while the shard is worked. */
  readonly leaseMs: number
  /** How often a kernel looks for a new epoch or for a shard left unfinished by another kernel. */
  readonly pollMs: number
}

export const DefaultReevaluationPace: ReevaluationPace = {
  shards: 8,
  concurrency: 4,
  batch: 32,
  maxRatePerSec: 2_000,
  minRatePerSec: 20,
  busyShare: 0.5,
  leaseMs: 15_000,
  pollMs: 500
}

const fromEnv = (name: string, fallback: number, min: number): number => {
  const raw = process.env[name]
  if (raw === undefined || raw === "") return fallback
  const n = Number(raw)
  if (!Number.isFinite(n) || n < min) throw new Error(`${name}: expected a number >= ${min}, got '${raw}'`)
  return n
}

/** The pace in force: overrides, else `WK_REEVAL_*` environment variables, else the defaults. */
export const reevaluationPaceOf = (overrides: Partial<ReevaluationPace> = {}): ReevaluationPace => {
  const d = DefaultReevaluationPace
  const maxRatePerSec = overrides.maxRatePerSec ?? fromEnv("WK_REEVAL_MAX_RATE", d.maxRatePerSec, 0.01)
  return {
    shards: Math.floor(overrides.shards ?? fromEnv("WK_REEVAL_SHARDS", d.shards, 1)),
    concurrency: Math.floor(overrides.concurrency ?? fromEnv("WK_REEVAL_CONCURRENCY", d.concurrency, 1)),
    batch: Math.floor(overrides.batch ?? fromEnv("WK_REEVAL_BATCH", d.batch, 1)),
    maxRatePerSec,
    minRatePerSec: Math.min(maxRatePerSec, overrides.minRatePerSec ?? fromEnv("WK_REEVAL_MIN_RATE", d.minRatePerSec, 0.01)),
    busyShare: overrides.busyShare ?? fromEnv("WK_REEVAL_BUSY_SHARE", d.busyShare, 0.05),
    leaseMs: overrides.leaseMs ?? fromEnv("WK_REEVAL_LEASE_MS", d.leaseMs, 100),
    pollMs: overrides.pollMs ?? fromEnv("WK_REEVAL_POLL_MS", d.pollMs, 10)
  }
}
