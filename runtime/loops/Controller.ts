import { Effect, Runtime, Stream } from "effect"
import { errorFields, log } from "../observability/Log.js"
import { kernelMetrics } from "../observability/KernelMetrics.js"
import { HeldCallStore, type Freshness } from "../ledger/HeldCallStore.js"
import { WakeQueue, type WakeDelivery } from "../ledger/Wakes.js"
import { settled } from "../heldcall/Facts.js"
import { Driver } from "./Driver.js"
import { KernelConfig } from "../KernelConfig.js"

/**
 * The call controller and recovery loop, over the wake queue. A wake is acked once its call is
 * quiescent, or redelivered after the delay the reconciler asked for (expiry, fallback,
 * delivery retry, a lease to wait out). A crashed process's unacked wakes come back after the
 * ack wait, which is how a restarted (or another) kernel finds interrupted work.
 */
export const runController = (opts: { readonly concurrency?: number; readonly ackWaitMs?: number } = {}) =>
  Effect.gen(function* () {
  const clock = yield* Effect.clock
    const driver = yield* Driver
    const store = yield* HeldCallStore
    const { owner } = yield* KernelConfig
    const ackWaitMs = opts.ackWaitMs ?? 5_000
    const wakes = yield* (yield* WakeQueue).consume({ ackWaitMs })
    const semaphore = yield* Effect.makeSemaphore(opts.concurrency ?? 64)
    const runtime = yield* Effect.runtime<never>()

    const isSettled = (heldId: string) => {
      const cached = store.peek(heldId)
      return cached !== undefined && settled(cached.facts)
    }

    const handle = (msg: WakeDelivery, freshness: Freshness) =>
      Effect.gen(function* () {
        const heldId = msg.heldId
        const keepAlive = setInterval(() => msg.working(), Math.max(500, ackWaitMs / 2))
        const r = yield* Effect.gen(function* () {
          // Most wakes arrive while this process is still finishing the call (the wake is written
          // before dispatch): once that drive ends, a settled call needs no drive and no read.
          if (yield* store.serialized(heldId, Effect.sync(() => isSettled(heldId)))) return { facts: null, requeueMs: null }
          return yield* driver.drive(heldId, freshness)
        }).pipe(Effect.either, Effect.ensuring(Effect.sync(() => clearInterval(keepAlive))))
        const outcome: ReconcileOutcome =
          r._tag === "Left" ? { _tag: "retry", afterMs: retryBackoffMs(msg.deliveries), reason: r.left.message }
          : r.right.requeueMs === null ? { _tag: "settled" }
          : { _tag: "requeue", afterMs: r.right.requeueMs }
        return conclude(msg, outcome)
      })

    const dispatch = (msg: WakeDelivery): Effect.Effect<void> => {
      kernelMetrics.wakes.inc({ redelivered: msg.redelivered ? "true" : "false" })
      // The wake an ALLOW call wrote before its dispatch, consumed after this process finished
      // the call: its facts (durable appends) are settled, so no drive or read can find work.
      // Acked here, before any fiber is started for it.
      if (isSettled(msg.heldId)) return Effect.sync(() => conclude(msg, Settled))
      // Another live process wrote this wake as it claimed the call and is driving it now:
      // looked at when its lease ends (recovery if it died), not read while it finishes.
      const driving = msg.redelivered ? null : msg.driving
      if (driving !== null && driving.owner !== owner) return Effect.sync(() => msg.nak(Math.max(1, driving.until - clock.unsafeCurrentTimeMillis() + 10)))
      // This process wrote the wake as it claimed the call and is driving it now (an ALLOW's
      // wake): acked once that drive leaves the call settled, with no fiber of its own. When the
      // drive ends with work left (a delivery owed until the agent acknowledges it), the wake is
      // driven on this process's view, which that drive just left: no read of the stream. A
      // command another process handled meanwhile wrote a wake of its own (read fresh) or asks
      // nothing of this process; the requeued wake reads fresh when it comes back.
      const local = driving !== null ? store.whenIdle(msg.heldId) : undefined
      if (local !== undefined)
        return Effect.sync(() => {
          const keepAlive = setInterval(() => msg.working(), Math.max(500, ackWaitMs / 2))
          void local.then(() => {
            clearInterval(keepAlive)
            if (isSettled(msg.heldId)) conclude(msg, Settled)
            else Runtime.runFork(runtime)(semaphore.withPermits(1)(handled(msg, "cached")))
          })
        })
      return forked(msg)
    }

    /** A wake handled, a defect concluded as one delivery that died. */
    const handled = (msg: WakeDelivery, freshness: Freshness = "fresh"): Effect.Effect<void> =>
      handle(msg, freshness).pipe(
        Effect.catchAllDefect((d) =>
          Effect.sync(() => {
            kernelMetrics.defects.inc({ loop: "controller" })
            log.error({ loop: "controller", held_id: msg.heldId, deliveries: msg.deliveries, ...errorFields(d) }, "controller defect")
            conclude(msg, afterDefect(msg.deliveries, errorFields(d).err))
          })
        )
      )

    /** Handles a wake on a fiber of its own, at most `concurrency` at a time. */
    const forked = (msg: WakeDelivery): Effect.Effect<void> =>
      Effect.zipRight(semaphore.take(1), Effect.forkDaemon(handled(msg).pipe(Effect.ensuring(semaphore.release(1)))))

    yield* Stream.runForEach(wakes, dispatch).pipe(
      Effect.catchAllCause((cause) => Effect.sync(() => (kernelMetrics.defects.inc({ loop: "controller" }), log.error({ loop: "controller", err: String(cause) }, "controller stopped")))),
      Effect.forkScoped
    )
  })

/**
 * What one reconcile of a wake came to: settled (acked, the call needs nothing more), requeue
 * (the reconciler asked to look again after a delay: expiry, fallback, a lease to wait out),
 * retry (the drive failed; handed out again with backoff) or terminal (the drive died on a
 * defect `TerminalAfterDefects` deliveries in a row: the wake is terminated so one poisoned call
 * cannot take a worker slot forever; it is logged and counted, and the recovery sweep offers the
 * call again on its next scan, so a fixed kernel picks it up). A store failure (a `LedgerError`)
 * is never terminal: a later delivery may find the store back.
 */
export type ReconcileOutcome =
  | { readonly _tag: "settled" }
  | { readonly _tag: "requeue"; readonly afterMs: number }
  | { readonly _tag: "retry"; readonly afterMs: number; readonly reason: string }
  | { readonly _tag: "terminal"; readonly reason: string }

/** A wake whose call needs nothing more: acked, and counted like every other outcome. */
const Settled: ReconcileOutcome = { _tag: "settled" }

/** How many deliveries of one wake may die on a defect before the wake is given up. */
export const TerminalAfterDefects = 5

/** The outcome of a drive that died on a defect at its `deliveries`-th delivery. */
export const afterDefect = (deliveries: number, reason: string): ReconcileOutcome =>
  deliveries >= TerminalAfterDefects ? { _tag: "terminal", reason } : { _tag: "retry", afterMs: retryBackoffMs(deliveries), reason }

/** Tells the wake queue what an outcome means, counted per outcome; a retry is logged with its reason. */
const conclude = (msg: WakeDelivery, outcome: ReconcileOutcome): void => {
  kernelMetrics.reconciles.inc({ outcome: outcome._tag })
  switch (outcome._tag) {
    case "settled":
      return msg.ack()
    case "requeue":
      return msg.nak(outcome.afterMs)
    case "retry":
      log.warn({ loop: "controller", held_id: msg.heldId, deliveries: msg.deliveries, err: outcome.reason }, "drive failed; retried with backoff")
      return msg.nak(outcome.afterMs)
    case "terminal":
      log.error({ loop: "controller", held_id: msg.heldId, deliveries: msg.deliveries, err: outcome.reason }, "drive died on every delivery; wake terminated until the next recovery scan")
      return msg.term()
  }
}

/**
 * How long a wake whose drive failed waits before it is handed out again: 1 s after its first
 * delivery, doubling per delivery, at most a minute (a store outage is not hammered).
 */
export const retryBackoffMs = (deliveries: number): number => Math.min(60_000, 1000 * 2 ** Math.min(6, Math.max(0, deliveries - 1)))
