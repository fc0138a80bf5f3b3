// The fuel a metered plugin call spends is reported with its outcome, in-process and from a
// worker alike (the worker's in thousands of units, over its result header): the same call of
// a deterministic plugin spends the same fuel either way, a longer input spends more, and a
// module that is not metered reports none.
import { describe, expect, it } from "vitest"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { FuelPerMs, MeteredRunner } from "../../runtime/plugins/internal/meteredRunner.js"
import type { HostHandler } from "../../runtime/plugins/internal/pluginRunner.js"
import { RunnerPool } from "../../runtime/plugins/internal/runnerPool.js"
import { meterModule } from "../../runtime/plugins/internal/wasmMeter.js"
import { canonicalize } from "../../runtime/schema/Canonical.js"
import { pluginDir } from "../plugins/support.js"

const noHost: HostHandler = () => ({ fault: "no host functions here" })
const wasm = () => new Uint8Array(readFileSync(join(pluginDir("prompt-injection"), "plugin.wasm")))
const admitInput = (result: string) => new TextEncoder().encode(canonicalize({ stage: "admit", principal: "alice", tool: "t", args: {}, result, config: {}, now: 1 }))

describe("plugin fuel", () => {
  it("is the same for a call in-process and on a worker, grows with the work, and is absent unmetered", async () => {
    const metered = meterModule(wasm())
    if (!metered.ok) throw new Error(metered.detail)
    const module = await WebAssembly.compile(new Uint8Array(metered.bytes))
    const spec = { label: "prompt-injection", module, exports: ["admit"], hostFunctions: [], memoryMaxPages: 64 }
    const inline = await MeteredRunner.start(spec)
    const pool = await RunnerPool.start({ ...spec, fuelPerMs: FuelPerMs })
    const plain = await RunnerPool.start({ ...spec, module: await WebAssembly.compile(wasm()) })
    try {
      const short = admitInput("hello, a short result")
      const long = admitInput("hello, a longer result ".repeat(200))
      const here = await inline.call("admit", short, 500, noHost)
      const there = await pool.call("admit", short, 500, noHost)
      expect([here.status, there.status]).toEqual(["ok", "ok"])
      expect(here.fuel).toBeGreaterThan(0)
      expect(there.fuel).toBe(Math.floor(here.fuel! / 1000) * 1000)
      expect((await inline.call("admit", long, 500, noHost)).fuel).toBeGreaterThan(here.fuel!)
      const unmetered = await plain.call("admit", short, 500, noHost)
      expect(unmetered.status).toBe("ok")
      expect(unmetered.fuel).toBeUndefined()
    } finally {
      await Promise.all([inline.close(), pool.close(), plain.close()])
    }
  })
})
