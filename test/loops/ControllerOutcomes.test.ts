import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, TestClock } from "effect"
import { afterDefect, runController, TerminalAfterDefects } from "../../runtime/loops/Controller.js"
import { Driver } from "../../runtime/loops/Driver.js"
import { layerMemoryHeldCallStore } from "../../runtime/ledger/memory/MemoryHeldCallStore.js"
import { layerMemoryWakes, MemoryWakeQueue } from "../../runtime/ledger/memory/MemoryWakes.js"
import { Wakes } from "../../runtime/ledger/Wakes.js"
import { LedgerError } from "../../runtime/ledger/LedgerError.js"
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
