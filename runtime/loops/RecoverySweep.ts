import { Duration, Effect, Schedule } from "effect"
import { errorFields, log } from "../observability/Log.js"
import { kernelMetrics } from "../observability/KernelMetrics.js"
import { acquireLease } from "../ledger/Leases.js"
import { OpenIndex, openHeldIds, shardOf } from "../ledger/OpenIndex.js"
import { quiescent } from "../heldcall/Facts.js"
import { wake } from "../ledger/Wakes.js"
import { Outbox } from "../ledger/Outbox.js"
import { KernelConfig } from "../KernelConfig.js"
import { Driver } from "./Driver.js"

/** How many shards the open-call index is split into; each is swept by whichever kernel leases it. */
export const SweepShards = 16

/**
 * One pass of the recovery sweep: for every shard this kernel can lease (held for one interval,
 * so within an interval each shard is swept by one kernel; a dead kernel's shards are free once
 * its leases end), drive each call of the open-call index from its durable record, paced (held
 * calls, and calls answered in the background, whose result is owed on the session). A call that still
 * waits on a timer gets a wake, so a lost wake is rewritten. Level-based: the sweep never asks
 * what happened to a call, it re-derives what is left to do, including a witness request that
 * never left (WK_WITNESS holds none for the call's generation and presentation).
 */
export const sweepOnce = Effect.gen(function* () {
  const clock = yield* Effect.clock
  const cfg = yield* KernelConfig
  const driver = yield* Driver
  const shards: Array<number> = []
  const now = clock.unsafeCurrentTimeMillis()
  for (let s = 0; s < SweepShards; s++) {
    const got = yield* acquireLease(`sweep.${s}`, cfg.owner, Math.max(1_000, cfg.sweepIntervalMs), now)
    if ("lease" in got) shards.push(s)
  }
  if (shards.length === 0) return 0
  const mine = new Set(shards)
  const ids = (yield* openHeldIds).filter((id) => mine.has(shardOf(id, SweepShards)))
  const spacing = Duration.millis(1000 / Math.max(1, cfg.sweepRatePerSec))
  yield* Effect.forEach(
    ids,
    (heldId) =>
      Effect.gen(function* () {
        const driven = yield* driver.drive(heldId, "fresh")
        if (driven.facts !== null && driven.requeueMs !== null) yield* wake(heldId)
        // The hold's commit is the witness request: one its kernel died before sending goes out here.
        const f = driven.facts
        if (f !== null && f.held && f.lifecycle === "open" && f.witness_request !== null && f.spec !== null) {
          yield* (yield* Outbox).ensureWitnessRequest(heldId, { held_id: heldId, generation: f.generation, expires_at: f.spec.expires_at, witness_request: f.witness_request })
        }
        // A call indexed without being held (answered in the background) leaves the index here
        // once nothing is left to happen (the drive removes held ones).
        if (driven.facts !== null && !driven.facts.held && quiescent(driven.facts)) yield* (yield* OpenIndex).remove(heldId)
      }).pipe(Effect.ignore, Effect.zipLeft(Effect.sleep(spacing))),
    { discard: true }
  )
  return ids.length
})

/** Sweeps once at start, then every `sweepIntervalMs`, in the background until the scope closes. */
export const runRecoverySweep = Effect.gen(function* () {
  const clock = yield* Effect.clock
  const cfg = yield* KernelConfig
  if (!(cfg.sweepIntervalMs > 0)) return
  yield* Effect.forkScoped(
    sweepOnce.pipe(
      Effect.tap(() => Effect.sync(() => {
        kernelMetrics.recoveryScans.inc()
        kernelMetrics.marks.lastRecoveryAt = clock.unsafeCurrentTimeMillis()
      })),
      Effect.catchAllCause((cause) => Effect.sync(() => (kernelMetrics.defects.inc({ loop: "recovery-sweep" }), log.error({ loop: "recovery-sweep", err: String(cause) }, "recovery sweep failed")))),
      Effect.repeat(Schedule.spaced(Duration.millis(cfg.sweepIntervalMs)))
    )
  )
})
