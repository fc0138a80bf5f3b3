import { Context, Effect, Fiber, Layer, Queue, Runtime, Stream } from "effect"
import { WakeQueue, Wakes, type Driving, type WakeDelivery } from "../Wakes.js"

/** A wake waiting in the memory queue. */
interface Pending {
  /** Which write of this call's wake it is: a newer write replaces it (one wake per call). */
  readonly id: number
  readonly driving: Driving | null
  deliveries: number
  state: "ready" | "in-flight" | "delayed"
  timer: Fiber.RuntimeFiber<void> | null
}

/** What a test may look at in the memory wake queue. */
export interface MemoryWakeView {
  /** Calls with a wake pending (ready, handed out, or waiting out a delay). */
  readonly pending: () => ReadonlyArray<string>
}

/** The memory wake queue's view, provided beside `Wakes` and `WakeQueue`. */
export class MemoryWakeQueue extends Context.Tag("wk/MemoryWakeQueue")<MemoryWakeQueue, MemoryWakeView>() {}

/**
 * The wake queue in memory, with the semantics of `WK_WAKES` and its consumer: at most one
 * pending wake per call (a new wake replaces the old, even one handed out), a wake not acked
 * within the ack wait handed out again, `nak(delay)` handing it out after the delay. Delays run
 * on Effect's `Clock`, so `TestClock` moves them.
 */
export const makeMemoryWakes = Effect.gen(function* () {
  const runtime = yield* Effect.runtime<never>()
  const ready = yield* Queue.unbounded<string>()
  const pending = new Map<string, Pending>()
  let nextId = 0
  let ackWaitMs = 5_000

  const cancelTimer = (p: Pending) => {
    if (p.timer !== null) Runtime.runFork(runtime)(Fiber.interrupt(p.timer))
    p.timer = null
  }
  const makeReady = (heldId: string, p: Pending) => {
    p.state = "ready"
    p.timer = null
    Queue.unsafeOffer(ready, heldId)
  }
  /** Runs `then` after `ms` on the layer's clock, unless the wake is replaced, acked or re-timed first. */
  const after = (heldId: string, p: Pending, ms: number, then: () => void) => {
    cancelTimer(p)
    p.timer = Runtime.runFork(runtime)(
      Effect.sleep(ms).pipe(Effect.zipRight(Effect.sync(() => void (pending.get(heldId) === p && then()))))
    )
  }

  const publish = (heldId: string, driving: Driving | null) => {
    const before = pending.get(heldId)
    if (before !== undefined) cancelTimer(before)
    const p: Pending = { id: ++nextId, driving, deliveries: 0, state: "ready", timer: null }
    pending.set(heldId, p)
    makeReady(heldId, p)
  }

  // Driving wakes written here that the consumer has not taken (see `Wakes.retire`), by call: their write.
  const written = new Map<string, number>()

  const handOut = (heldId: string): WakeDelivery | null => {
    const p = pending.get(heldId)
    if (p === undefined || p.state !== "ready") return null
    if ((written.get(heldId) ?? Infinity) <= p.id) written.delete(heldId)
    p.state = "in-flight"
    p.deliveries++
    const current = () => pending.get(heldId) === p
    after(heldId, p, ackWaitMs, () => makeReady(heldId, p))
    const done = () => {
      if (!current()) return
      cancelTimer(p)
      pending.delete(heldId)
    }
    return {
      heldId,
      driving: p.driving,
      redelivered: p.deliveries > 1,
      deliveries: p.deliveries,
      ack: () => done(),
      nak: (delayMs) => {
        if (!current() || p.state !== "in-flight") return
        p.state = "delayed"
        after(heldId, p, Math.max(0, delayMs), () => makeReady(heldId, p))
      },
      // Given up: gone like an acked wake (a later wake of the call is a new one).
      term: () => done(),
      working: () => {
        if (current() && p.state === "in-flight") after(heldId, p, ackWaitMs, () => makeReady(heldId, p))
      }
    }
  }

  const wakes = Wakes.of({
    begin: (heldId, driving) => {
      publish(heldId, driving ?? null)
      if (driving !== undefined) written.set(heldId, nextId)
      return Effect.void
    },
    retire: (heldId) => {
      const id = written.get(heldId)
      written.delete(heldId)
      const p = pending.get(heldId)
      if (id === undefined || p === undefined || p.id !== id) return
      cancelTimer(p)
      pending.delete(heldId)
    }
  })
  const queue = WakeQueue.of({
    consume: (opts) =>
      Effect.sync(() => {
        ackWaitMs = opts.ackWaitMs
        return Stream.fromQueue(ready).pipe(
          Stream.map(handOut),
          Stream.filter((d): d is WakeDelivery => d !== null)
        )
      })
  })
  const view: MemoryWakeView = { pending: () => [...pending.keys()] }
  return Context.make(Wakes, wakes).pipe(Context.add(WakeQueue, queue), Context.add(MemoryWakeQueue, view))
})

export const layerMemoryWakes = Layer.effectContext(makeMemoryWakes)
