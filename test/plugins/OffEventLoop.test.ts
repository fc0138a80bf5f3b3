// Plugins spend at most their inline fuel on the kernel's event loop: a metered plugin spending its
// whole fuel budget leaves timers (and every other call) running, and a busy plugin's next call gets a worker of
// its own instead of queuing behind the long one.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { PluginHost } from "../../runtime/plugins/PluginHost.js"
import { hostLayer, pinOf } from "./support.js"

const noHost = () => ({ fault: "no host functions here" })

describe("plugins off the event loop", () => {
  it.scoped("a metered plugin running to the end of its fuel does not block the event loop: a 10 ms timer fires before the call ends", () =>
    Effect.gen(function* () {
      const host = yield* PluginHost
      const loop = yield* host.load(pinOf("fixtures/loop-forever", { timeout_ms: 100 }))
      expect(loop.isolation).toBe("metered")
      const order: Array<string> = []
      const timer = new Promise<void>((r) => setTimeout(() => r(order.push("timer") as unknown as void), 10))
      const call = yield* host.invoke(loop, "adjudicate", { n: 1 }, noHost).pipe(Effect.tap(() => Effect.sync(() => order.push("call"))), Effect.fork)
      yield* Effect.promise(() => timer)
      const done = yield* call.await
      expect(done._tag).toBe("Success")
      if (done._tag === "Success") {
        // Stopped by its fuel (deterministic, as an audit re-run stops it), not by the watchdog.
        expect(done.value.raw.status).toBe("timeout")
        expect(done.value.raw.text).toMatch(/fuel budget of 100000000 units \(100 ms\) exhausted/)
      }
      expect(order).toEqual(["timer", "call"])
    }).pipe(Effect.provide(hostLayer())),
    60_000
  )

  it.scoped("a second call of a plugin busy with a long call runs on another worker and ends first", () =>
    Effect.gen(function* () {
      const host = yield* PluginHost
      const long = yield* host.load(pinOf("fixtures/loop-forever", { timeout_ms: 1500 }))
      const short = yield* host.load(pinOf("fixtures/loop-forever", { timeout_ms: 20 }))
      expect(short.runner).toBe(long.runner)
      const order: Array<string> = []
      const a = yield* host.invoke(long, "adjudicate", { n: 1 }, noHost).pipe(Effect.tap(() => Effect.sync(() => order.push("long"))), Effect.fork)
      const b = yield* host.invoke(short, "adjudicate", { n: 2 }, noHost).pipe(Effect.tap(() => Effect.sync(() => order.push("short"))), Effect.fork)
      yield* b.await
      yield* a.await
      expect(order).toEqual(["short", "long"])
    }).pipe(Effect.provide(hostLayer())),
    60_000
  )
})
