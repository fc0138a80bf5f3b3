import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Option, Queue, Stream, TestClock } from "effect"
import { MemoryWakeQueue, makeMemoryWakes } from "../../runtime/ledger/memory/MemoryWakes.js"
import { WakeQueue, Wakes, type WakeDelivery } from "../../runtime/ledger/Wakes.js"

/** The memory wake queue keeps the semantics of WK_WAKES and its consumer, on TestClock's time. */
const consumed = Effect.gen(function* () {
  const services = yield* makeMemoryWakes
  const wakes = Context.get(services, Wakes)
  const queue = Context.get(services, WakeQueue)
  const view = Context.get(services, MemoryWakeQueue)
  const got = yield* Queue.unbounded<WakeDelivery>()
  const stream = yield* queue.consume({ ackWaitMs: 1_000 })
  yield* Effect.forkScoped(Stream.runForEach(stream, (d) => Queue.offer(got, d)))
  const next = Effect.zipRight(Effect.yieldNow().pipe(Effect.repeatN(10)), Queue.poll(got))
  return { wakes, view, next }
})

describe("memory wake queue", () => {
  it.scoped("a wake not acked is handed out again after the ack wait, and only then", () =>
    Effect.gen(function* () {
      const { wakes, next } = yield* consumed
      yield* wakes.begin("h1")
      const first = Option.getOrThrow(yield* next)
      expect(first.redelivered).toBe(false)
      yield* TestClock.adjust(999)
      expect(Option.isNone(yield* next)).toBe(true)
      yield* TestClock.adjust(1)
      const again = Option.getOrThrow(yield* next)
      expect(again.heldId).toBe("h1")
      expect(again.redelivered).toBe(true)
    })
  )

  it.scoped("nak hands it out after the delay; ack removes it; working restarts the ack wait", () =>
    Effect.gen(function* () {
      const { wakes, view, next } = yield* consumed
      yield* wakes.begin("h2", { owner: "k", until: 5 })
      const d = Option.getOrThrow(yield* next)
      expect(d.driving).toEqual({ owner: "k", until: 5 })
      d.nak(300)
      yield* TestClock.adjust(299)
      expect(Option.isNone(yield* next)).toBe(true)
      yield* TestClock.adjust(1)
      const later = Option.getOrThrow(yield* next)
      yield* TestClock.adjust(800)
      later.working()
      yield* TestClock.adjust(800)
      expect(Option.isNone(yield* next)).toBe(true)
      later.ack()
      expect(view.pending()).toEqual([])
      yield* TestClock.adjust(5_000)
      expect(Option.isNone(yield* next)).toBe(true)
    })
  )

  it.scoped("retire: a driving wake no consumer took is gone; one the consumer took stays for its ack", () =>
    Effect.gen(function* () {
      const { wakes, view, next } = yield* consumed
      // Given a wake written as this process claimed the call, not yet handed out,
      yield* wakes.begin("r1", { owner: "k", until: 10_000 })
      // when the call settles, it is deleted: nobody is handed it, now or after a lease.
      wakes.retire("r1")
      expect(view.pending()).toEqual([])
      yield* TestClock.adjust(20_000)
      expect(Option.isNone(yield* next)).toBe(true)
      // Given one the consumer took, retiring leaves it to the consumer's ack.
      yield* wakes.begin("r2", { owner: "k", until: 10_000 })
      const taken = Option.getOrThrow(yield* next)
      wakes.retire("r2")
      expect(view.pending()).toEqual(["r2"])
      taken.ack()
      expect(view.pending()).toEqual([])
    })
  )

  it.scoped("retire deletes only the driving wake this writer wrote: a plain wake, or a newer one of another command, stays", () =>
    Effect.gen(function* () {
      const { wakes, view } = yield* consumed
      yield* wakes.begin("r3")
      wakes.retire("r3")
      expect(view.pending()).toEqual(["r3"])
      yield* wakes.begin("r4", { owner: "k", until: 10_000 })
      yield* wakes.begin("r4")
      wakes.retire("r4")
      expect(view.pending()).toContain("r4")
    })
  )

  it.scoped("one pending wake per call: a newer wake replaces the one handed out", () =>
    Effect.gen(function* () {
      const { wakes, view, next } = yield* consumed
      yield* wakes.begin("h3")
      yield* wakes.begin("h3")
      const d = Option.getOrThrow(yield* next)
      expect(Option.isNone(yield* next)).toBe(true)
      yield* wakes.begin("h3")
      const newer = Option.getOrThrow(yield* next)
      // The older delivery's ack does not remove the newer wake.
      d.ack()
      expect(view.pending()).toEqual(["h3"])
      newer.ack()
      expect(view.pending()).toEqual([])
    })
  )
})
