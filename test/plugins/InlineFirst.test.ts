// Metered plugins answer on the event loop under a small fuel budget and move to a worker past
// it. These specs try to break that: a call past the inline fuel must still get its whole
// budget and the answer a worker alone gives; a plugin that keeps overrunning must stop costing
// the event loop; a plugin granted an effectful host function never runs inline.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { PluginHost } from "../../runtime/plugins/PluginHost.js"
import { DefaultInlineLimits, InlineFirstRunner } from "../../runtime/plugins/internal/inlineFirstRunner.js"
import { FuelPerMs, MeteredRunner } from "../../runtime/plugins/internal/meteredRunner.js"
import type { HostHandler, RawOutcome, Runner } from "../../runtime/plugins/internal/pluginRunner.js"
import { RunnerPool } from "../../runtime/plugins/internal/runnerPool.js"
import { meterModule } from "../../runtime/plugins/internal/wasmMeter.js"
import { canonicalize } from "../../runtime/schema/Canonical.js"
import { hostLayer, pinOf, pluginDir } from "./support.js"

const noHost: HostHandler = () => ({ fault: "no host functions here" })

/** The metered module of a committed plugin, compiled. */
const meteredModule = async (name: string) => {
  const m = meterModule(new Uint8Array(readFileSync(join(pluginDir(name), "plugin.wasm"))))
  if (!m.ok) throw new Error(m.detail)
  return WebAssembly.compile(new Uint8Array(m.bytes))
}

/** A worker runner that counts the calls it is handed. */
const counting = (runner: Runner) => {
  const calls: Array<number> = []
  const counted: Runner = { call: (e, input, timeoutMs, host) => (calls.push(timeoutMs), runner.call(e, input, timeoutMs, host)), close: () => runner.close() }
  return { counted, calls }
}

const runnersOf = async (name: string, stage: string) => {
  const module = await meteredModule(name)
  const spec = { label: name, module, exports: [stage], hostFunctions: [], memoryMaxPages: 64 }
  const inline = await MeteredRunner.start(spec)
  const pool = await RunnerPool.start({ ...spec, fuelPerMs: FuelPerMs })
  return { inline, pool }
}

const admitInput = (result: string) => new TextEncoder().encode(canonicalize({ stage: "admit", principal: "alice", tool: "t", args: {}, result, config: {}, now: 1 }))
const answer = (o: RawOutcome) => ({ status: o.status, text: o.text })

describe("inline first, then a worker", () => {
  it("given a call within the inline fuel, when it runs, then it is answered without a worker", async () => {
    const { inline, pool } = await runnersOf("prompt-injection", "admit")
    const { counted, calls } = counting(pool)
    const runner = new InlineFirstRunner(inline, counted)
    try {
      const r = await runner.call("admit", admitInput("hello, a short result"), 500, noHost)
      expect(answer(r)).toEqual({ status: "ok", text: '{"verdict":"ADMIT"}' })
      expect(calls).toEqual([])
      expect(runner.inline).toBe(true)
    } finally {
      await runner.close()
    }
  })

  it("given a call that spends the inline fuel, when it runs, then a worker runs it again with its whole budget and gives the answer a worker alone gives", async () => {
    const { inline, pool } = await runnersOf("prompt-injection", "admit")
    const alone = await runnersOf("prompt-injection", "admit")
    const { counted, calls } = counting(pool)
    // An 8 KB scan needs more fuel than the inline budget; the size cutoff is lifted to show it.
    const runner = new InlineFirstRunner(inline, counted, { ...DefaultInlineLimits, maxInput: 1 << 20 })
    try {
      const input = admitInput("x".repeat(8000))
      const r = await runner.call("admit", input, 500, noHost)
      expect(calls).toEqual([500])
      const workerOnly = await alone.pool.call("admit", input, 500, noHost)
      expect(workerOnly.status).toBe("ok")
      expect(answer(r)).toEqual(answer(workerOnly))
    } finally {
      await Promise.all([runner.close(), alone.inline.close(), alone.pool.close()])
    }
  })

  it("given inputs over the inline size, when they run, then they go straight to a worker", async () => {
    const { inline, pool } = await runnersOf("prompt-injection", "admit")
    const { counted, calls } = counting(pool)
    const runner = new InlineFirstRunner(inline, counted)
    try {
      const r = await runner.call("admit", admitInput("y".repeat(DefaultInlineLimits.maxInput)), 500, noHost)
      expect(r.status).toBe("ok")
      expect(calls).toEqual([500])
      expect(runner.inline).toBe(true)
    } finally {
      await runner.close()
    }
  })

  it("given a plugin that never ends, when it is called again and again, then it overruns inline at most maxOverruns times and is stopped by its whole budget on a worker each time", async () => {
    const { inline, pool } = await runnersOf("fixtures/loop-forever", "adjudicate")
    const { counted, calls } = counting(pool)
    const runner = new InlineFirstRunner(inline, counted)
    try {
      const input = new TextEncoder().encode("{}")
      const outcomes: Array<RawOutcome> = []
      for (let i = 0; i < DefaultInlineLimits.maxOverruns + 2; i++) outcomes.push(await runner.call("adjudicate", input, 20, noHost))
      for (const o of outcomes) expect(answer(o)).toEqual({ status: "timeout", text: `fuel budget of ${20n * FuelPerMs} units (20 ms) exhausted` })
      // Every call reached a worker with its whole budget; no inline run after the last overrun.
      expect(calls).toEqual(outcomes.map(() => 20))
      expect(runner.inline).toBe(false)
    } finally {
      await runner.close()
    }
  })

  it.scoped("given the host, when it loads pins, then a pure metered plugin runs inline first and one granted publish never does", () =>
    Effect.gen(function* () {
      const host = yield* PluginHost
      expect((yield* host.load(pinOf("spend-limit"))).runner).toBeInstanceOf(InlineFirstRunner)
      const sink = yield* host.load(pinOf("audit-sink"))
      expect(sink.isolation).toBe("metered")
      expect(sink.runner).not.toBeInstanceOf(InlineFirstRunner)
      expect((yield* host.load(pinOf("daily-cap"))).runner).not.toBeInstanceOf(InlineFirstRunner)
    }).pipe(Effect.provide(hostLayer()))
  )
})
