// The memory cap the host writes into a module before compiling it.
import { describe, expect, it } from "@effect/vitest"
import { capMemory } from "../../runtime/plugins/internal/wasmBinary.js"
import { artifact } from "./support.js"

// (module (memory (export "m") ...)) by hand: memory section, then an export of memory 0 as "m".
const moduleWithMemory = (limits: number[]) =>
  Uint8Array.from([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x05, limits.length + 1, 0x01, ...limits, 0x07, 0x05, 0x01, 0x01, 0x6d, 0x02, 0x00])

describe("capMemory", () => {
  it("adds a maximum to an unbounded memory and keeps a lower declared one", async () => {
    const a = capMemory(moduleWithMemory([0x00, 0x02]), 8)
    expect(a.ok && [a.minPages, a.maxPages]).toEqual([2, 8])
    const b = capMemory(moduleWithMemory([0x01, 0x01, 0x03]), 8)
    expect(b.ok && [b.minPages, b.maxPages]).toEqual([1, 3])
    if (!a.ok) return
    const instance = await WebAssembly.instantiate(await WebAssembly.compile(new Uint8Array(a.bytes)), {})
    const m = instance.exports["m"] as WebAssembly.Memory
    expect(m.grow(6)).toBe(2)
    expect(() => m.grow(1)).toThrow(RangeError)
  })

  it("a real plugin cannot grow past the cap", async () => {
    const r = capMemory(artifact("spend-limit").bytes, 3)
    expect(r.ok).toBe(true)
    if (!r.ok) return
    expect(WebAssembly.validate(new Uint8Array(r.bytes))).toBe(true)
  })

  it("refuses an initial memory over the cap, and malformed or shared memories", () => {
    expect(capMemory(moduleWithMemory([0x00, 0x09]), 8)).toMatchObject({ ok: false, problem: "memory_limit" })
    expect(capMemory(moduleWithMemory([0x03, 0x01, 0x02]), 8)).toMatchObject({ ok: false, problem: "invalid_wasm" })
    expect(capMemory(Uint8Array.from([1, 2, 3]), 8)).toMatchObject({ ok: false, problem: "invalid_wasm" })
    expect(capMemory(Uint8Array.from([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00]), 8)).toMatchObject({ ok: false, problem: "invalid_wasm" })
  })
})
