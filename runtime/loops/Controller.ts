import { Effect } from "effect"
import { AckPolicy, DeliverPolicy, type JsMsg } from "@nats-io/jetstream"
import { Nats } from "../ledger/Nats.js"
import { LedgerError } from "../ledger/LedgerError.js"
import { Streams } from "../schema/Subjects.js"
import { HeldCallStore } from "../ledger/HeldCallStore.js"
import { settled } from "../heldcall/Facts.js"
import { Driver } from "./Driver.js"
import { KernelConfig } from "../KernelConfig.js"
import { drivingOf } from "../ledger/Wakes.js"

/** The durable consumer every kernel process shares: each wake is handled by one of them. */
export const ControllerConsumer = "wk-controller"
const WakesPrefix = "wk.v1.wakes."

/**
 * The call controller and recovery loop, over `WK_WAKES`. A wake is acked once its call is
 * quiescent, or redelivered after the delay the reconciler asked for (expiry, fallback,
 * delivery retry, a lease to wait out). A crashed process's unacked wakes come back after the
 * ack wait, which is how a restarted (or another) kernel finds interrupted work.
 */
export const runController = (opts: { readonly concurrency?: number; readonly ackWaitMs?: number } = {}) =>
  Effect.gen(function* () {
    const { js, jsm } = yield* Nats
    const driver = yield* Driver
    const store = yield* HeldCallStore
    const { owner } = yield* KernelConfig
    const ackWaitMs = opts.ackWaitMs ?? 5_000
    yield* Effect.tryPromise({
      try: async () => {
        const exists = await jsm.consumers.info(Streams.wakes, ControllerConsumer).then(() => true, () => false)
        if (!exists) {
          await jsm.consumers.add(Streams.wakes, {
            durable_name: ControllerConsumer,
            ack_policy: AckPolicy.Explicit,
            deliver_policy: DeliverPolicy.All,
            ack_wait: ackWaitMs * 1_000_000,
            max_ack_pending: -1,
            max_deliver: -1
          })
        }
      },
      catch: (cause) => new LedgerError({ operation: "create controller consumer", message: String(cause), cause })
    })
    const consumer = yield* Effect.tryPromise({
      try: () => js.consumers.get(Streams.wakes, ControllerConsumer),
      catch: (cause) => new LedgerError({ operation: "open controller consumer", message: String(cause), cause })
    })
    const messages = yield* Effect.tryPromise({
      try: () => consumer.consume({ max_messages: 256 }),
      catch: (cause) => new LedgerError({ operation: "consume controller", message: String(cause), cause })
    })
    yield* Effect.addFinalizer(() => Effect.promise(() => messages.close().then(() => undefined, () => undefined)))
    const semaphore = yield* Effect.makeSemaphore(opts.concurrency ?? 64)

    const isSettled = (heldId: string) => {
      const cached = store.peek(heldId)
      return cached !== undefined && settled(cached.facts)
    }

    const handle = (msg: JsMsg) =>
      Effect.gen(function* () {
        const heldId = msg.subject.slice(WakesPrefix.length)
        const keepAlive = setInterval(() => msg.working(), Math.max(500, ackWaitMs / 2))
        const r = yield* Effect.gen(function* () {
          // Most wakes arrive while this process is still finishing the call (the wake is written
          // before dispatch): once that drive ends, a settled call needs no drive and no read.
          if (yield* store.serialized(heldId, Effect.sync(() => isSettled(heldId)))) return { facts: null, requeueMs: null }
          return yield* driver.drive(heldId, "fresh")
        }).pipe(Effect.either, Effect.ensuring(Effect.sync(() => clearInterval(keepAlive))))
        if (r._tag === "Left") return msg.nak(1000)
        return r.right.requeueMs === null ? msg.ack() : msg.nak(r.right.requeueMs)
      })

    void (async () => {
      for await (const msg of messages) {
        // The wake an ALLOW call wrote before its dispatch, consumed after this process finished
        // the call: its facts (durable appends) are settled, so no drive or read can find work.
        // Acked here, before any fiber is started for it.
        if (isSettled(msg.subject.slice(WakesPrefix.length))) {
          msg.ack()
          continue
        }
        // Another live process wrote this wake as it claimed the call and is driving it now:
        // looked at when its lease ends (recovery if it died), not read while it finishes.
        const driving = msg.redelivered ? null : drivingOf(msg.data)
        if (driving !== null && driving.owner !== owner) {
          msg.nak(Math.max(1, driving.until - Date.now() + 10))
          continue
        }
        await Effect.runPromise(semaphore.take(1))
        void Effect.runPromise(
          handle(msg).pipe(
            Effect.catchAllDefect((d) => Effect.sync(() => (console.error("wk: controller defect", d), msg.nak(1000)))),
            Effect.ensuring(semaphore.release(1))
          )
        )
      }
    })()
  })
