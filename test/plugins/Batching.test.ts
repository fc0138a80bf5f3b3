// Calls that wait for a plugin's worker go over in one hand-off and run back to back: each still
// gets its own input, its own answer and its own limits. A call the watchdog stops does not take
// the calls queued behind it down: they run on the respawned worker.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { PluginHost } from "../../runtime/plugins/PluginHost.js"
import { hostLayer, pinOf } from "./support.js"

const noHost = () => ({ fault: "no host functions here" })
const rules = { pay: { amount_field: "amount", witness_above: 100, deny_above: 1_000 } }
const inputOf = (amount: number) => ({ stage: "adjudicate", proposal: { principal: "alice", session_id: "s", turn_id: "t", call_id: `c${amount}`, tool: "pay", args: { amount } }, config: { rules }, now: 0 })

describe("batched hand-offs", () => {
  it.scoped("60 concurrent calls of one plugin: each answer is its own call's (verdict and amount)", () =>
    Effect.gen(function* () {
      const host = yield* PluginHost
      const plugin = yield* host.load(pinOf("spend-limit", { config: { rules } }))
      const amounts = Array.from({ length: 60 }, (_, i) => (i * 37) % 1_200)
      // Started before any is awaited: they queue on the plugin's workers and go over in batches.
      const started = yield* Effect.forEach(amounts, (a) => host.start(plugin, "adjudicate", inputOf(a), noHost))
      const results = yield* Effect.all(started)
      results.forEach((inv, i) => {
        const amount = amounts[i]!
        expect(inv.raw.status).toBe("ok")
        const out = JSON.parse(inv.raw.text) as { verdict: string; reasons?: Array<{ reason: string }> }
        expect(out.verdict).toBe(amount > 1_000 ? "DENY" : amount > 100 ? "REQUIRE_WITNESS" : "ALLOW")
        if (amount > 100) expect(inv.raw.text).toContain(`amount ${amount} is over`)
      })
    }).pipe(Effect.provide(hostLayer())),
    60_000
  )

  it.scoped("three runaway calls queued on an unmetered worker: each is stopped by its own watchdog, from its own start", () =>
    Effect.gen(function* () {
      const host = yield* PluginHost
      const loop = yield* host.load(pinOf("fixtures/loop-forever", { timeout_ms: 150, isolation: "worker" }))
      const t0 = Date.now()
      const started = yield* Effect.forEach([1, 2, 3], (n) => host.start(loop, "adjudicate", { n }, noHost))
      const results = yield* Effect.all(started)
      for (const inv of results) {
        expect(inv.raw.status).toBe("timeout")
        expect(inv.raw.text).toContain("no answer within 150 ms")
      }
      // Queued behind one another on the pool's workers, each ran its full 150 ms, none less.
      expect(Date.now() - t0).toBeGreaterThanOrEqual(300)
    }).pipe(Effect.provide(hostLayer())),
    60_000
  )

  it.scoped("metered calls in one batch each get their own fuel: all stop by fuel, deterministically", () =>
    Effect.gen(function* () {
      const host = yield* PluginHost
      const loop = yield* host.load(pinOf("fixtures/loop-forever", { timeout_ms: 30 }))
      expect(loop.isolation).toBe("metered")
      const started = yield* Effect.forEach([1, 2, 3, 4, 5], (n) => host.start(loop, "adjudicate", { n }, noHost))
      for (const inv of yield* Effect.all(started)) expect(inv.raw.text).toMatch(/fuel budget of 30000000 units \(30 ms\) exhausted/)
    }).pipe(Effect.provide(hostLayer())),
    60_000
  )
})
