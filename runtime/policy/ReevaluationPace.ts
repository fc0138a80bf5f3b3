/**
 * How the background re-evaluation of open held calls after a policy change is paced and split.
 * The work is cut into `shards` by a hash of the held id; a kernel works a shard under a lease,
 * `concurrency` calls at a time, in batches of `batch`, at most `rate` calls a second. The rate
 * follows the promise it keeps: the ALLOW latency (propose to reply) this kernel serves while the
 * walk runs stays within `latencyFactor` times its idle latency. Between batches `paceStep` looks
 * at the ALLOW replies served since the last step: above `latencyFactor` times the baseline the
 * rate halves, below `latencyHeadroom` of that it grows by a quarter, in between it holds; with
 * no ALLOW served (nobody waits on this process) it grows.
 *
 * Pure: time arrives as data (`at`, `now`); the kernel feeds the samples it measures.
 */
export interface ReevaluationPace {
  readonly shards: number
  readonly concurrency: number
  readonly batch: number
  readonly maxRatePerSec: number
  readonly minRatePerSec: number
  /** The rate a walk starts at, before any latency is seen. */
  readonly startRatePerSec: number
  /** The promise: ALLOW latency during the walk at most this many times the idle latency. */
  readonly latencyFactor: number
  /** Share of `latencyFactor` below which the rate may grow (between it and the factor, it holds). */
  readonly latencyHeadroom: number
  /** Fewest ALLOW replies a step judges latency on (fewer: they wait for the next step). */
  readonly minSamples: number
  /** How many idle ALLOW replies the baseline keeps (the newest). */
  readonly idleSamples: number
  /** How old an idle ALLOW reply may be and still count for the baseline. */
  readonly idleHorizonMs: number
  /** Time-to-live of a shard's lease; renewed while the shard is worked. */
  readonly leaseMs: number
  /** How often a kernel looks for a new epoch or for a shard left unfinished by another kernel. */
  readonly pollMs: number
}

export const DefaultReevaluationPace: ReevaluationPace = {
  shards: 8,
  concurrency: 16,
  batch: 64,
  maxRatePerSec: 5_000,
  minRatePerSec: 20,
  startRatePerSec: 200,
  latencyFactor: 2,
  latencyHeadroom: 0.75,
  minSamples: 3,
  idleSamples: 256,
  idleHorizonMs: 10 * 60_000,
  leaseMs: 15_000,
  pollMs: 500
}

/** One ALLOW reply: when it was answered (ms since the epoch) and how long propose to reply took. */
export interface AllowSample {
  readonly at: number
  readonly ms: number
}

/** The ALLOW latencies the pace reacts to. */
export interface LatencyLog {
  /** Replies served while no walk ran, oldest first (at most `idleSamples`). */
  readonly idle: ReadonlyArray<AllowSample>
  /** Replies served during the walk since a step last judged them. */
  readonly recent: ReadonlyArray<number>
  /** The lowest p50 a step of the current walk judged: the baseline while no idle one is known. */
  readonly floorMs: number | null
}

export const emptyLatencyLog: LatencyLog = { idle: [], recent: [], floorMs: null }

/** The median of `xs` (null when empty). */
export const medianOf = (xs: ReadonlyArray<number>): number | null => {
  if (xs.length === 0) return null
  const s = [...xs].sort((a, b) => a - b)
  const mid = s.length >> 1
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
}

/** Most replies one step keeps to judge (the newest). */
const MaxRecent = 1024

/** Records one ALLOW reply: into the idle baseline, or (while a walk runs) into what the next step judges. */
export const observed = (pace: ReevaluationPace, log: LatencyLog, sample: AllowSample, walking: boolean): LatencyLog =>
  walking
    ? { ...log, recent: [...log.recent, sample.ms].slice(-MaxRecent) }
    : { ...log, idle: [...log.idle, sample].slice(-Math.max(1, pace.idleSamples)) }

/** A walk starts: nothing of an earlier walk is judged again. */
export const walkStarted = (log: LatencyLog): LatencyLog => ({ ...log, recent: [], floorMs: null })

/** The idle ALLOW p50 at `now`: the median of idle replies inside the horizon, if there are enough. */
export const idleBaselineMs = (pace: ReevaluationPace, log: LatencyLog, now: number): number | null => {
  const fresh = log.idle.filter((s) => now - s.at <= pace.idleHorizonMs).map((s) => s.ms)
  return fresh.length >= pace.minSamples ? medianOf(fresh) : null
}

/** What one step saw and decided. */
export interface PaceStep {
  readonly rate: number
  readonly log: LatencyLog
  /** The baseline judged against (idle p50, else the walk's floor), and the p50 judged; null: none. */
  readonly baselineMs: number | null
  readonly recentMs: number | null
}

const clamp = (pace: ReevaluationPace, rate: number): number => Math.min(pace.maxRatePerSec, Math.max(pace.minRatePerSec, rate))

/** The next rate from the current one and the ALLOW replies served since the last step. */
export const paceStep = (pace: ReevaluationPace, rate: number, log: LatencyLog, now: number): PaceStep => {
  // No ALLOW served since the last step: nobody waits on this process.
  if (log.recent.length === 0) return { rate: clamp(pace, rate * 1.25), log, baselineMs: idleBaselineMs(pace, log, now), recentMs: null }
  // Too few to judge: they wait for the next step.
  if (log.recent.length < pace.minSamples) return { rate: clamp(pace, rate), log, baselineMs: idleBaselineMs(pace, log, now), recentMs: null }
  const recentMs = medianOf(log.recent)!
  const floorMs = log.floorMs === null ? recentMs : Math.min(log.floorMs, recentMs)
  const baselineMs = idleBaselineMs(pace, log, now) ?? floorMs
  const ratio = recentMs / Math.max(baselineMs, Number.MIN_VALUE)
  const next = ratio > pace.latencyFactor ? rate * 0.5 : ratio > pace.latencyFactor * pace.latencyHeadroom ? rate : rate * 1.25
  return { rate: clamp(pace, next), log: { ...log, recent: [], floorMs }, baselineMs, recentMs }
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
  const minRatePerSec = Math.min(maxRatePerSec, overrides.minRatePerSec ?? fromEnv("WK_REEVAL_MIN_RATE", d.minRatePerSec, 0.01))
  return {
    ...d,
    shards: Math.floor(overrides.shards ?? fromEnv("WK_REEVAL_SHARDS", d.shards, 1)),
    concurrency: Math.floor(overrides.concurrency ?? fromEnv("WK_REEVAL_CONCURRENCY", d.concurrency, 1)),
    batch: Math.floor(overrides.batch ?? fromEnv("WK_REEVAL_BATCH", d.batch, 1)),
    maxRatePerSec,
    minRatePerSec,
    startRatePerSec: Math.min(maxRatePerSec, Math.max(minRatePerSec, overrides.startRatePerSec ?? fromEnv("WK_REEVAL_START_RATE", d.startRatePerSec, 0.01))),
    latencyFactor: overrides.latencyFactor ?? fromEnv("WK_REEVAL_LATENCY_FACTOR", d.latencyFactor, 1),
    latencyHeadroom: overrides.latencyHeadroom ?? d.latencyHeadroom,
    minSamples: overrides.minSamples ?? d.minSamples,
    idleSamples: overrides.idleSamples ?? d.idleSamples,
    idleHorizonMs: overrides.idleHorizonMs ?? d.idleHorizonMs,
    leaseMs: overrides.leaseMs ?? fromEnv("WK_REEVAL_LEASE_MS", d.leaseMs, 100),
    pollMs: overrides.pollMs ?? fromEnv("WK_REEVAL_POLL_MS", d.pollMs, 10)
  }
}
