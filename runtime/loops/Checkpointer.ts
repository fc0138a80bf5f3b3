import { Effect, Schedule } from "effect"
import { errorFields, log } from "../observability/Log.js"
import { kernelMetrics } from "../observability/KernelMetrics.js"
import { writeCheckpoint } from "../ledger/Checkpoints.js"
import { commitSigningKey } from "../ledger/CommitSigningKey.js"

/** How often a kernel with a signing key checkpoints `WK_EVENTS` (`WK_CHECKPOINT_INTERVAL_MS`, default a minute; 0 turns it off). */
export const checkpointIntervalMs = (): number => {
  const raw = process.env["WK_CHECKPOINT_INTERVAL_MS"]
  const n = raw === undefined || raw === "" ? 60_000 : Number(raw)
  return Number.isFinite(n) && n >= 0 ? n : 60_000
}

/**
 * Signs a checkpoint of `WK_EVENTS` every `checkpointIntervalMs` (ledger/Checkpoints.ts), until
 * the scope closes. A kernel without a signing key writes none: an unsigned checkpoint would
 * prove nothing to an auditor. A failed pass is reported and the next one tries again.
 */
export const runCheckpointer = Effect.gen(function* () {
  const key = yield* commitSigningKey
  const every = checkpointIntervalMs()
  if (key === undefined || every === 0) return
  const pass = Effect.suspend(() => writeCheckpoint(key, new Date())).pipe(
    Effect.catchAll((e) => Effect.sync(() => (kernelMetrics.defects.inc({ loop: "checkpointer" }), log.error({ loop: "checkpointer", ...errorFields(e) }, "checkpoint failed"))))
  )
  yield* Effect.forkScoped(Effect.repeat(Effect.delay(pass, `${every} millis`), Schedule.forever))
})
