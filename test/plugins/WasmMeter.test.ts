// Fuel metering: exact, deterministic charges; every committed plugin meters to a valid module.
import { describe, expect, it } from "@effect/vitest"
import { FuelExport, meterModule } from "../../runtime/plugins/internal/wasmMeter.js"
import { findPluginDirs, readPluginDir } from "../../runtime/plugins/PluginSource.js"
import { pluginsRoot } from "./support.js"

const header = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00]
const typeSec = [0x01, 0x04, 0x01, 0x60, 0x00, 0x00]
const funcSec = [0x03, 0x02, 0x01, 0x00]
const exportF = [0x07, 0x05, 0x01, 0x01, 0x66, 0x00, 0x00]
const codeSec = (body: number[]) => [0x0a, body.length + 2, 0x01, body.length, ...body]

// (func (export "f") (local i32) (loop (local.set 0 (i32.add (local.get 0) (i32.const 1))) (br_if 0 (i32.lt_u (local.get 0) (i32.const 10)))))
const tenIterations = Uint8Array.from([...header, ...typeSec, ...funcSec, ...exportF, ...codeSec([0x01, 0x01, 0x7f, 0x03, 0x40, 0x20, 0x00, 0x41, 0x01, 0x6a, 0x21, 0x00, 0x20, 0x00, 0x41, 0x0a, 0x49, 0x0d, 0x00, 0x0b, 0x0b])])
// (func (export "f") (loop (br 0)))
const forever = Uint8Array.from([...header, ...typeSec, ...funcSec, ...exportF, ...codeSec([0x00, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b])])

const instantiate = async (bytes: Uint8Array) => {
  const m = meterModule(bytes)
  if (!m.ok) throw new Error(m.detail)
  const { exports } = await WebAssembly.instantiate(await WebAssembly.compile(new Uint8Array(m.bytes)), {})
  return { f: exports["f"] as () => void, fuel: exports[FuelExport] as WebAssembly.Global }
}

describe("meterModule", () => {
  it("charges exactly one unit per call and per loop iteration", async () => {
    const { f, fuel } = await instantiate(tenIterations)
    fuel.value = 100n
    f()
    expect(fuel.value).toBe(89n)
    f()
    expect(fuel.value).toBe(78n)
  })

  it("charges bulk memory instructions by size", async () => {
    // (memory 1) (func (export "f") (memory.fill (i32.const 0) (i32.const 0) (i32.const 1600)))
    const memSec = [0x05, 0x03, 0x01, 0x00, 0x01]
    const fill = Uint8Array.from([...header, ...typeSec, ...funcSec, ...memSec, ...exportF, ...codeSec([0x00, 0x41, 0x00, 0x41, 0x00, 0x41, 0xc0, 0x0c, 0xfc, 0x0b, 0x00, 0x0b])])
    const { f, fuel } = await instantiate(fill)
    fuel.value = 1000n
    f()
    expect(fuel.value).toBe(1000n - 1n - 100n)
  })

  it("traps when the fuel runs out, at the same point every time", async () => {
    const { f, fuel } = await instantiate(forever)
    for (let i = 0; i < 3; i++) {
      fuel.value = 1000n
      expect(() => f()).toThrow(WebAssembly.RuntimeError)
      expect(fuel.value).toBe(0n)
    }
  })

  it("refuses code it cannot decode (here a SIMD instruction), so the host uses a worker", () => {
    const simd = Uint8Array.from([...header, ...typeSec, ...funcSec, ...codeSec([0x00, 0xfd, 0x0c, ...new Array(16).fill(0), 0x1a, 0x0b])])
    expect(meterModule(simd)).toMatchObject({ ok: false, detail: expect.stringContaining("unsupported instruction 0xfd") })
  })

  it("meters every committed plugin to a valid module", () => {
    const dirs = findPluginDirs(pluginsRoot)
    expect(dirs.length).toBeGreaterThanOrEqual(16)
    for (const dir of dirs) {
      const m = meterModule(readPluginDir(dir).bytes)
      expect(m.ok, dir).toBe(true)
      if (m.ok) expect(WebAssembly.validate(new Uint8Array(m.bytes)), dir).toBe(true)
    }
  })
})
