import { Effect, Stream } from "effect"
import { errorFields, log } from "../observability/Log.js"
import { kernelMetrics } from "../observability/KernelMetrics.js"
import { HeldCallStore } from "../ledger/HeldCallStore.js"
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
    const driver = yield* Driver
    const store = yield* HeldCallStore
    const { owner } = yield* KernelConfig
    const ackWaitMs = opts.ackWaitMs ?? 5_000
    const wakes = yield* (yield* WakeQueue).consume({ ackWaitMs })
    const semaphore = yield* Effect.makeSemaphore(opts.concurrency ?? 64)

    const isSettled = (heldId: string) => {
      const cached = store.peek(heldId)
      return cached !== undefined && settled(cached.facts)
    }

    const handle = (msg: WakeDelivery) =>
      Effect.gen(function* () {
        const heldId = msg.heldId
        const keepAlive = setInterval(() => msg.working(), Math.max(500, ackWaitMs / 2))
        const r = yield* Effect.gen(function* () {
          // Most wakes arrive while this process is still finishing the call (the wake is written
          // before dispatch): once that drive ends, a settled call needs no drive and no read.
          if (yield* store.serialized(heldId, Effect.sync(() => isSettled(heldId)))) return { facts: null, requeueMs: null }
          return yield* driver.drive(heldId, "fresh")
        }).pipe(Effect.either, Effect.ensuring(Effect.sync(() => clearInterval(keepAlive))))
        if (r._tag === "Left") {
          kernelMetrics.reconciles.inc({ outcome: "retry" })
          log.warn({ loop: "controller", held_id: heldId, deliveries: msg.deliveries, err: r.left.message }, "drive failed; retried with backoff")
          return msg.nak(retryBackoffMs(msg.deliveries))
        }
        kernelMetrics.reconciles.inc({ outcome: r.right.requeueMs === null ? "settled" : "requeue" })
        return r.right.requeueMs === null ? msg.ack() : msg.nak(r.right.requeueMs)
      })

    const dispatch = (msg: WakeDelivery): Effect.Effect<void> => {
      kernelMetrics.wakes.inc({ redelivered: msg.redelivered ? "true" : "false" })
      // The wake an ALLOW call wrote before its dispatch, consumed after this process finished
      // the call: its facts (durable appends) are settled, so no drive or read can find work.
      // Acked here, before any fiber is started for it.
      if (isSettled(msg.heldId)) return Effect.sync(() => msg.ack())
      // Another live process wrote this wake as it claimed the call and is driving it now:
      // looked at when its lease ends (recovery if it died), not read while it finishes.
      const driving = msg.redelivered ? null : msg.driving
      if (driving !== null && driving.owner !== owner) return Effect.sync(() => msg.nak(Math.max(1, driving.until - Date.now() + 10)))
      return Effect.zipRight(
        semaphore.take(1),
        Effect.forkDaemon(
          handle(msg).pipe(
            Effect.catchAllDefect((d) => Effect.sync(() => (kernelMetrics.defects.inc({ loop: "controller" }), log.error({ loop: "controller", held_id: msg.heldId, ...errorFields(d) }, "controller defect"), msg.nak(retryBackoffMs(msg.deliveries))))),
            Effect.ensuring(semaphore.release(1))
          )
        )
      )
    }

    yield* Stream.runForEach(wakes, dispatch).pipe(
      Effect.catchAllCause((cause) => Effect.sync(() => (kernelMetrics.defects.inc({ loop: "controller" }), log.error({ loop: "controller", err: String(cause) }, "controller stopped")))),
      Effect.forkScoped
    )
  })

/**
 * How long a wake whose drive failed waits before it is handed out again: 1 s after its first
 * delivery, doubling per delivery, at most a minute (a store outage is not hammered).
 */
export const retryBackoffMs = (deliveries: number): number => Math.min(60_000, 1000 * 2 ** Math.min(6, Math.max(0, deliveries - 1)))
