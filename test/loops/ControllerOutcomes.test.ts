import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Layer, TestClock } from "effect"
import { afterDefect, runController, TerminalAfterDefects } from "../../runtime/loops/Controller.js"
import { Driver } from "../../runtime/loops/Driver.js"
import { layerMemoryHeldCallStore, makeMemoryHeldCallStore } from "../../runtime/ledger/memory/MemoryHeldCallStore.js"
import { HeldCallStore, type Freshness } from "../../runtime/ledger/HeldCallStore.js"
import { initialFacts } from "../../runtime/heldcall/Facts.js"
import type { HeldCallFacts } from "../../runtime/schema/Facts.js"
import { layerMemoryWakes, MemoryWakeQueue } from "../../runtime/ledger/memory/MemoryWakes.js"
import { Wakes } from "../../runtime/ledger/Wakes.js"
import { LedgerError } from "../../runtime/schema/LedgerError.js"
import { layerKernelConfig } from "../../runtime/KernelConfig.js"
import { kernelMetrics } from "../../runtime/observability/KernelMetrics.js"

// The controller's reconcile outcomes under faults: a drive that dies on a defect is retried
// with backoff and, after `TerminalAfterDefects` deliveries, its wake is terminated (the other
// calls keep flowing); a drive that fails on the store is retried, never given up.
const drives = new Map<string, number>()
const layerFaultyDriver = Layer.succeed(
  Driver,
  Driver.of({
    drive: (heldId) =>
      Effect.suspend(() => {
        drives.set(heldId, (drives.get(heldId) ?? 0) + 1)
        if (heldId === "h_poison") return Effect.die(new Error("a bug in this call's drive"))
        if (heldId === "h_store" && drives.get(heldId)! < 8) return Effect.fail(new LedgerError({ operation: "read", message: "store away" }))
        return Effect.succeed({ facts: null, requeueMs: null })
      }),
    driveFrom: () => Effect.dieMessage("not used")
  })
)
const layer = Layer.mergeAll(layerFaultyDriver, layerMemoryHeldCallStore, layerMemoryWakes, layerKernelConfig({}))

const terminalCount = async () => (await kernelMetrics.reconciles.get()).values.find((v) => v.labels.outcome === "terminal")?.value ?? 0

describe("controller outcomes", () => {
  it("classifies a defect: retry with backoff, then terminal", () => {
    expect(afterDefect(1, "x")).toEqual({ _tag: "retry", afterMs: 1000, reason: "x" })
    expect(afterDefect(TerminalAfterDefects - 1, "x")._tag).toBe("retry")
    expect(afterDefect(TerminalAfterDefects, "x")).toEqual({ _tag: "terminal", reason: "x" })
  })

  it.scoped("terminates a poisoned call's wake after its deliveries, keeps retrying a store failure, settles the rest", () =>
    Effect.gen(function* () {
      const before = yield* Effect.promise(terminalCount)
      const wakes = yield* Wakes
      const view = yield* MemoryWakeQueue
      yield* runController({ ackWaitMs: 30_000 })
      yield* Effect.forEach(["h_poison", "h_store", "h_fine"], (id) => wakes.begin(id), { discard: true })
      // Backoff between deliveries: 1, 2, 4, 8, 16, 32, 60 s.
      for (let i = 0; i < 40; i++) yield* TestClock.adjust("5 seconds")
      expect(drives.get("h_poison")).toBe(TerminalAfterDefects)
      expect(drives.get("h_fine")).toBe(1)
      expect(drives.get("h_store")).toBe(8)
      expect(view.pending()).toEqual([])
      expect((yield* Effect.promise(terminalCount)) - before).toBe(1)
    }).pipe(Effect.provide(layer))
  )
})

// A wake this process wrote as it claimed a call it is still driving (an ALLOW's recovery wake)
// waits for that drive, with no fiber or drive of its own: acked when the drive left the call
// settled, handled like any other wake when it did not. A crash before the drive ends leaves the
// wake unacked, so it comes back after the ack wait (the recovery tests kill the process).
describe("a wake of a call this process is driving", () => {
  const localDrives = new Map<string, number>()
  const readAs = new Map<string, Freshness>()
  const settledFacts = { ...initialFacts("h_settled"), lifecycle: "completed", execution: "effect-recorded", result_admission: "admitted", continuation_delivery: "none" } as HeldCallFacts
  const layerCountingDriver = Layer.succeed(
    Driver,
    Driver.of({
      drive: (heldId, freshness) => Effect.sync(() => (localDrives.set(heldId, (localDrives.get(heldId) ?? 0) + 1), readAs.set(heldId, freshness ?? "fresh"), { facts: null, requeueMs: null })),
      driveFrom: () => Effect.dieMessage("not used")
    })
  )
  // The memory store, with h_settled's cached facts those of a call that needs nothing more once its drive settled it.
  let driveSettled = false
  const layerStore = Layer.effect(
    HeldCallStore,
    Effect.map(makeMemoryHeldCallStore, (store) => HeldCallStore.of({ ...store, peek: (heldId) => (heldId === "h_settled" && driveSettled ? { facts: settledFacts, revision: 0 } : store.peek(heldId)) }))
  )
  const local = Layer.mergeAll(layerCountingDriver, layerStore, layerMemoryWakes, layerKernelConfig({ owner: "kernel-a" }))

  it.scoped("given the drive holds the call, when its wake arrives, then nothing happens until the drive ends; then a settled call's wake is acked undriven and an unsettled one is driven once, on the view that drive left; a wake nobody is driving is driven on a fresh read", () =>
    Effect.gen(function* () {
      const wakes = yield* Wakes
      const view = yield* MemoryWakeQueue
      const store = yield* HeldCallStore
      yield* runController({ ackWaitMs: 30_000 })
      const release = yield* Deferred.make<void>()
      // The local drives: each holds its call until released.
      for (const id of ["h_settled", "h_open"]) yield* Effect.forkScoped(store.serialized(id, Deferred.await(release).pipe(Effect.tap(() => Effect.sync(() => (driveSettled = true))))))
      yield* Effect.yieldNow()
      yield* Effect.forEach(["h_settled", "h_open"], (id) => wakes.begin(id, { owner: "kernel-a", until: Date.now() + 30_000 }), { discard: true })
      yield* TestClock.adjust("10 millis")
      expect(localDrives.size).toBe(0)
      expect([...view.pending()].sort()).toEqual(["h_open", "h_settled"])
      yield* Deferred.succeed(release, undefined)
      for (let i = 0; i < 10 && view.pending().length > 0; i++) yield* TestClock.adjust("10 millis")
      expect(view.pending()).toEqual([])
      expect(localDrives.get("h_settled")).toBeUndefined()
      expect(localDrives.get("h_open")).toBe(1)
      expect(readAs.get("h_open")).toBe("cached")
      yield* wakes.begin("h_other")
      for (let i = 0; i < 10 && view.pending().length > 0; i++) yield* TestClock.adjust("10 millis")
      expect(localDrives.get("h_other")).toBe(1)
      expect(readAs.get("h_other")).toBe("fresh")
    }).pipe(Effect.provide(local))
  )
})
