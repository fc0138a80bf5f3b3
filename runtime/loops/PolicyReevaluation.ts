import { Duration, Effect, Ref } from "effect"
import { errorFields, log } from "../observability/Log.js"
import { kernelMetrics } from "../observability/KernelMetrics.js"
import { KernelConfig } from "../KernelConfig.js"
import { acquireLease, releaseLease, type Lease } from "../ledger/Leases.js"
import type { LedgerError } from "../schema/LedgerError.js"
import { OpenIndex, shardOf } from "../ledger/OpenIndex.js"
import { ReevaluationProgressStore } from "../ledger/ReevaluationProgressStore.js"
import { wake } from "../ledger/Wakes.js"
import { beforeDispatch } from "../heldcall/Facts.js"
import { PolicyStore } from "../policy/PolicyStore.js"
import type { ReevaluationProgress } from "../schema/ReevaluationProgress.js"
import { Driver, type Driven } from "./Driver.js"
import { HeldCalls } from "./HeldCalls.js"
import { AllowLatency } from "./AllowLatency.js"

/** What this kernel process is re-evaluating right now (its `wk.v1.admin.status` answer shows it). */
export interface ReevaluationWork {
  readonly epoch: number
  readonly shard: number
  readonly done: number
  readonly total: number
  readonly rate_per_s: number
}

const leaseKey = (epoch: number, shard: number) => `reevaluation.${epoch}.${shard}`
/** How often a shard's progress record is written while it is worked (and always at its end). */
const ProgressEveryMs = 250

/**
 * The re-evaluation of open held calls after a policy change, in the background: `policy.apply`
 * records the new epoch and answers; every kernel then walks the open-call index (`wk_open`) for
 * the latest epoch. The index is cut into shards by a hash of the held id; a kernel takes a shard
 * under a lease in `wk_leases`, walks its calls in ascending held-id order, and records its
 * cursor in `wk_policy` (`reevaluation.<epoch>.<shard>`), so a kernel that dies mid-shard is
 * replaced by one that resumes after the cursor once the lease ends. Each call gets what a
 * policy change always recorded: `policy.epoch_changed` for the new epoch, then a drive under the
 * new policy (re-adjudication: a call the new policy denies ends denied, one it allows is released).
 *
 * Pacing: `concurrency` calls at a time, batches spaced to at most the current rate, and the rate
 * follows the ALLOW latency this process serves meanwhile against its idle ALLOW latency (see
 * ReevaluationPace): it grows while that stays within the promised factor and backs off when it
 * does not, so calls served by the same process keep their latency. A newer epoch supersedes the one being
 * worked: the walk stops and starts over for the newer one. Safety never waits on this loop: a call
 * whose evidence was not checked under the epoch in force cannot be dispatched (Reconciler).
 */
export const runPolicyReevaluation = Effect.gen(function* () {
  const clock = yield* Effect.clock
  const calls = yield* HeldCalls
  const driver = yield* Driver
  const policies = yield* PolicyStore
  const { owner, reevaluation: pace } = yield* KernelConfig
  const working = yield* Ref.make<ReevaluationWork | null>(null)
  const latency = yield* AllowLatency

  const progress = yield* ReevaluationProgressStore
  const readProgress = progress.read
  const writeProgress = (p: ReevaluationProgress) => progress.write(p)

  const listOpen = (yield* OpenIndex).list

  /** Records `policy.epoch_changed` on one open call (unless it already has it) and drives it (heldcall/decide/Epoch.ts). */
  const reevaluate = (epoch: number, heldId: string) =>
    Effect.gen(function* () {
      // Driven here, not forked: the walk's pace counts the drive, and a wake is written only when needed.
      const handled = yield* calls.handle(heldId, { _tag: "ChangeEpoch", epoch }, { follow: "none" })
      if (handled.drive === null) return
      const driven = yield* driver.drive(heldId, handled.drive)
      if (needsWake(driven, clock.unsafeCurrentTimeMillis())) yield* wake(heldId)
    }).pipe(
      // A call this walk could not finish is handed to the controller (level-based, it re-plans).
      Effect.catchAll(() => wake(heldId)),
      Effect.ignore
    )

  /** Works one shard of `epoch` under `lease` until it is finished, superseded, or the lease is lost. */
  const runShard = (epoch: number, shard: number, first: Lease, open: () => Effect.Effect<ReadonlyArray<string>, LedgerError>) =>
    Effect.gen(function* () {
      yield* latency.walking(true)
      const prior = yield* readProgress(epoch, shard)
      if (prior?.finished === true) return
      const cursor = prior?.cursor ?? null
      const ids = (yield* open()).filter((id) => shardOf(id, pace.shards) === shard && (cursor === null || id > cursor))
      const startedAt = new Date(clock.unsafeCurrentTimeMillis()).toISOString()
      const t0 = clock.unsafeCurrentTimeMillis()
      let lease = first
      let record: ReevaluationProgress = {
        epoch,
        shard,
        shards: pace.shards,
        done: prior?.done ?? 0,
        total: (prior?.done ?? 0) + ids.length,
        cursor,
        finished: false,
        owner,
        resumed_from: prior?.done ?? 0,
        rate_per_s: 0,
        started_at: startedAt,
        updated_at: startedAt
      }
      yield* writeProgress(record)
      let rate = pace.startRatePerSec
      let lastWrite = clock.unsafeCurrentTimeMillis()
      for (let i = 0; i < ids.length; i += pace.batch) {
        if ((yield* policies.current).epoch > epoch) return
        if (lease.until - clock.unsafeCurrentTimeMillis() < pace.leaseMs / 2) {
          const renewed = yield* acquireLease(lease.key, owner, pace.leaseMs, clock.unsafeCurrentTimeMillis())
          if (!("lease" in renewed)) return
          lease = renewed.lease
        }
        // The ALLOW latency served since the last batch, against the idle one.
        rate = (yield* latency.step(rate)).rate
        const batch = ids.slice(i, i + pace.batch)
        const started = clock.unsafeCurrentTimeMillis()
        yield* Effect.forEach(batch, (id) => reevaluate(epoch, id), { concurrency: pace.concurrency, discard: true })
        const done = record.done + batch.length
        const now = clock.unsafeCurrentTimeMillis()
        record = { ...record, done, cursor: batch[batch.length - 1]!, rate_per_s: Math.round(((done - record.resumed_from) / Math.max(1, now - t0)) * 1000 * 10) / 10, updated_at: new Date(now).toISOString() }
        yield* Ref.set(working, { epoch, shard, done, total: record.total, rate_per_s: record.rate_per_s })
        if (now - lastWrite >= ProgressEveryMs) {
          yield* writeProgress(record)
          lastWrite = now
        }
        const spacing = (batch.length / rate) * 1000 - (clock.unsafeCurrentTimeMillis() - started)
        yield* spacing > 1 ? Effect.sleep(Duration.millis(spacing)) : Effect.yieldNow()
      }
      yield* writeProgress({ ...record, finished: true, updated_at: new Date(clock.unsafeCurrentTimeMillis()).toISOString() })
    }).pipe(Effect.ensuring(Effect.zipRight(Ref.set(working, null), latency.walking(false))))

  const forgetOlder = progress.forgetOlder

  // The latest epoch this process saw finished on every shard: nothing to do until a newer one.
  let complete = 0
  const pass = Effect.gen(function* () {
    const epoch = (yield* policies.current).epoch
    if (epoch === complete) return
    // One listing of the open index per pass, shared by the shards this process takes.
    let listed: ReadonlyArray<string> | null = null
    const open = () => (listed !== null ? Effect.succeed(listed) : Effect.tap(listOpen, (ids) => Effect.sync(() => (listed = ids))))
    let finished = 0
    const start = shardOf(owner, pace.shards)
    for (let k = 0; k < pace.shards; k++) {
      const shard = (start + k) % pace.shards
      if ((yield* policies.current).epoch > epoch) return
      if ((yield* readProgress(epoch, shard))?.finished === true) {
        finished++
        continue
      }
      const taken = yield* acquireLease(leaseKey(epoch, shard), owner, pace.leaseMs, clock.unsafeCurrentTimeMillis())
      if (!("lease" in taken)) continue
      yield* runShard(epoch, shard, taken.lease, open).pipe(Effect.ensuring(releaseLease(taken.lease).pipe(Effect.ignore)))
      if ((yield* readProgress(epoch, shard))?.finished === true) finished++
    }
    if (finished === pace.shards) {
      complete = epoch
      yield* forgetOlder(epoch)
    }
  }).pipe(Effect.catchAll((e) => Effect.sync(() => (kernelMetrics.defects.inc({ loop: "policy-reevaluation" }), log.error({ loop: "policy-reevaluation", ...errorFields(e) }, "policy re-evaluation pass failed")))))

  yield* Effect.forkScoped(Effect.forever(Effect.zipRight(pass, Effect.sleep(Duration.millis(pace.pollMs)))))
  return { working: Ref.get(working) }
})

/**
 * Whether a re-evaluated call needs a new wake. A call still parked before dispatch already has a
 * wake pending for its expiry; it needs a new one only when its next look is due sooner (a
 * fallback or an approval's expiry of the new contract). Any other call that asks to be looked at
 * again (an ended call's delivery retry, a lease to wait out) gets one.
 */
const needsWake = (driven: Driven, now: number): boolean => {
  const f = driven.facts
  if (f === null || driven.requeueMs === null) return false
  if (f.lifecycle === "open" && beforeDispatch(f) && f.spec !== null && now + driven.requeueMs >= Date.parse(f.spec.expires_at)) return false
  return true
}
