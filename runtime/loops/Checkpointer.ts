import { Effect, Schedule } from "effect"
import { errorFields, log } from "../observability/Log.js"
import { kernelMetrics } from "../observability/KernelMetrics.js"
import { writeCheckpoint } from "../ledger/Checkpoints.js"
import { commitSigningKey } from "../ledger/CommitSigningKey.js"
import { anchorFileFromEnv, appendToAnchor, type AnchoredCheckpoint } from "../ledger/CheckpointAnchor.js"
import { unverifiedCount } from "../ledger/WrittenCommits.js"

const envNumber = (name: string, fallback: number): number => {
  const raw = process.env[name]
  const n = raw === undefined || raw === "" ? fallback : Number(raw)
  return Number.isFinite(n) && n >= 0 ? n : fallback
}

/** How often a kernel with a signing key checkpoints `WK_EVENTS` (`WK_CHECKPOINT_INTERVAL_MS`, default 10 s; 0 turns it off). */
export const checkpointIntervalMs = (): number => envNumber("WK_CHECKPOINT_INTERVAL_MS", 10_000)

/** After how many of its own commits a kernel checkpoints without waiting for the interval (`WK_CHECKPOINT_EVERY_COMMITS`, default 1,000). */
export const checkpointEveryCommits = (): number => envNumber("WK_CHECKPOINT_EVERY_COMMITS", 1_000)

/**
 * Signs a checkpoint of `WK_EVENTS` every `checkpointIntervalMs`, or sooner once this process
 * stored `checkpointEveryCommits` commits since the last (ledger/Checkpoints.ts), until the scope
 * closes, and appends each one it stored to the anchor file outside NATS (`WK_ANCHOR_FILE`,
 * ledger/CheckpointAnchor.ts). A kernel without a signing key writes none: an unsigned
 * checkpoint would prove nothing to an auditor. A failed pass, or a failed append (kept and
 * retried), is reported and the next tick tries again.
 */
export const runCheckpointer = Effect.gen(function* () {
  const clock = yield* Effect.clock
  const key = yield* commitSigningKey
  const every = checkpointIntervalMs()
  const commits = checkpointEveryCommits()
  if (key === undefined || every === 0) return
  const anchor = anchorFileFromEnv()
  if (anchor === undefined) log.warn({ loop: "checkpointer" }, "checkpoints are kept only in WK_EVENTS: set WK_ANCHOR_FILE to anchor them outside NATS")
  const unanchored: Array<AnchoredCheckpoint> = []
  let last = clock.unsafeCurrentTimeMillis()
  const failed = (what: string) => (e: unknown) => Effect.sync(() => (kernelMetrics.defects.inc({ loop: "checkpointer" }), log.error({ loop: "checkpointer", ...errorFields(e) }, what)))
  const pass = Effect.gen(function* () {
    const now = clock.unsafeCurrentTimeMillis()
    if (now - last < every && (commits === 0 || unverifiedCount() < commits)) return
    last = now
    const stored = yield* writeCheckpoint(key, new Date(now))
    if (stored !== null && anchor !== undefined) unanchored.push({ seq: stored.seq, data: stored.data })
  }).pipe(Effect.catchAll(failed("checkpoint failed")))
  const anchorPass = Effect.try(() => {
    if (anchor === undefined || unanchored.length === 0) return
    appendToAnchor(anchor, unanchored)
    unanchored.length = 0
  }).pipe(Effect.catchAll(failed(`cannot append to the checkpoint anchor ${anchor}`)))
  const tick = Math.min(every, 1_000)
  yield* Effect.forkScoped(Effect.repeat(Effect.delay(Effect.zipRight(pass, anchorPass), `${tick} millis`), Schedule.forever))
})
