// Minimal reading and patching of a wasm binary: enough to cap the module's own linear memory.
// Browsers' and Node's WebAssembly API has no per-instance memory limit for an exported memory,
// so the host rewrites the memory section's maximum before compiling.

const Magic = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00]
const MemorySectionId = 5

export type PatchResult =
  | { readonly ok: true; readonly bytes: Uint8Array; readonly minPages: number; readonly maxPages: number }
  | { readonly ok: false; readonly problem: "invalid_wasm" | "memory_limit"; readonly detail: string }

const readLeb = (b: Uint8Array, pos: number): [value: number, next: number] => {
  let result = 0
  let shift = 0
  for (;;) {
    if (pos >= b.length || shift > 28) throw new RangeError("truncated LEB128")
    const byte = b[pos++]!
    result += (byte & 0x7f) * 2 ** shift
    shift += 7
    if ((byte & 0x80) === 0) return [result, pos]
  }
}

const leb = (n: number): number[] => {
  const out: number[] = []
  do {
    let byte = n & 0x7f
    n = Math.floor(n / 128)
    if (n !== 0) byte |= 0x80
    out.push(byte)
  } while (n !== 0)
  return out
}

/**
 * Returns the module with its (single, non-shared, 32-bit) memory capped at `limitPages`.
 * A module whose initial memory is already over the limit is refused.
 */
export const capMemory = (bytes: Uint8Array, limitPages: number): PatchResult => {
  try {
    if (bytes.length < 8 || Magic.some((m, i) => bytes[i] !== m)) return { ok: false, problem: "invalid_wasm", detail: "not a wasm 1.0 binary" }
    const parts: Uint8Array[] = [bytes.subarray(0, 8)]
    let pos = 8
    let found: { minPages: number; maxPages: number } | undefined
    while (pos < bytes.length) {
      const id = bytes[pos]!
      const [size, bodyStart] = readLeb(bytes, pos + 1)
      const end = bodyStart + size
      if (end > bytes.length) return { ok: false, problem: "invalid_wasm", detail: "section runs past the end of the module" }
      if (id === MemorySectionId) {
        const [count, p1] = readLeb(bytes, bodyStart)
        if (count !== 1) return { ok: false, problem: "invalid_wasm", detail: `expected exactly one memory, found ${count}` }
        const flags = bytes[p1]!
        if (flags !== 0 && flags !== 1) return { ok: false, problem: "invalid_wasm", detail: `unsupported memory type (flags ${flags}: shared or 64-bit)` }
        const [min, p2] = readLeb(bytes, p1 + 1)
        const declaredMax = flags === 1 ? readLeb(bytes, p2)[0] : Infinity
        if (min > limitPages) return { ok: false, problem: "memory_limit", detail: `initial memory is ${min} pages, the pin allows ${limitPages}` }
        const max = Math.min(declaredMax, limitPages)
        const body = [...leb(1), 0x01, ...leb(min), ...leb(max)]
        parts.push(Uint8Array.from([MemorySectionId, ...leb(body.length), ...body]))
        found = { minPages: min, maxPages: max }
      } else {
        parts.push(bytes.subarray(pos, end))
      }
      pos = end
    }
    if (found === undefined) return { ok: false, problem: "invalid_wasm", detail: "the module defines no memory of its own" }
    return { ok: true, bytes: Buffer.concat(parts), ...found }
  } catch (e) {
    return { ok: false, problem: "invalid_wasm", detail: e instanceof Error ? e.message : String(e) }
  }
}
