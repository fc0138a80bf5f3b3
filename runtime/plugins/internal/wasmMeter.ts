// Fuel metering by rewriting the wasm: one unit is charged at every function entry and every
// loop iteration, and bulk memory instructions (memory.fill/copy/init) are charged one unit per
// 16 bytes, from an exported i64 global the host sets before each call; below one the plugin
// traps. Every unbounded computation needs a loop or a call, and between two charges a plugin
// runs at most the straight-line code of one function body, so fuel bounds time. It is
// deterministic: a re-run exhausts at the same point. Instructions this decoder does not know
// (SIMD, threads, exceptions) make metering refuse, and the host runs such a plugin in a
// worker instead.

/** Export name of the fuel global. */
export const FuelExport = "__wk_fuel"

export type MeterResult = { readonly ok: true; readonly bytes: Uint8Array } | { readonly ok: false; readonly detail: string }

class Reader {
  pos: number
  constructor(readonly b: Uint8Array, pos: number) {
    this.pos = pos
  }
  byte(): number {
    if (this.pos >= this.b.length) throw new RangeError("unexpected end of module")
    return this.b[this.pos++]!
  }
  u32(): number {
    let result = 0
    let shift = 0
    for (;;) {
      const x = this.byte()
      result += (x & 0x7f) * 2 ** shift
      if ((x & 0x80) === 0) return result
      shift += 7
      if (shift > 35) throw new RangeError("LEB128 too long")
    }
  }
  /** Skips one LEB128 (signed or unsigned) of at most `maxBytes`. */
  skipLeb(maxBytes: number): void {
    for (let i = 0; i < maxBytes; i++) if ((this.byte() & 0x80) === 0) return
    throw new RangeError("LEB128 too long")
  }
  skip(n: number): void {
    if (this.pos + n > this.b.length) throw new RangeError("unexpected end of module")
    this.pos += n
  }
}

const leb = (n: number): number[] => {
  const out: number[] = []
  do {
    let x = n & 0x7f
    n = Math.floor(n / 128)
    if (n !== 0) x |= 0x80
    out.push(x)
  } while (n !== 0)
  return out
}

/** Signed LEB128 of a non-negative integer (i64.const immediates). */
const sleb = (n: number): number[] => {
  const out = leb(n)
  if ((out[out.length - 1]! & 0x40) !== 0) {
    out[out.length - 1]! |= 0x80
    out.push(0x00)
  }
  return out
}

/** Fuel for instantiation (the module's start function), before the host sets a call's budget. */
export const StartFuel = 100_000_000

const vec = (items: ReadonlyArray<ReadonlyArray<number> | Uint8Array>, count: number): Uint8Array => {
  const parts = [Uint8Array.from(leb(count)), ...items.map((i) => (i instanceof Uint8Array ? i : Uint8Array.from(i)))]
  return Buffer.concat(parts)
}

const section = (id: number, body: Uint8Array): Uint8Array => Buffer.concat([Uint8Array.from([id, ...leb(body.length)]), body])

const skipBlockType = (r: Reader): void => {
  const t = r.b[r.pos]!
  if (t === 0x40 || t === 0x7f || t === 0x7e || t === 0x7d || t === 0x7c || t === 0x7b || t === 0x70 || t === 0x6f) r.pos++
  else r.skipLeb(5) // a type index (s33)
}

const skipMemarg = (r: Reader): void => {
  const align = r.u32()
  if ((align & 0x40) !== 0) r.u32() // multi-memory: a memory index follows
  r.u32()
}

/**
 * Rewrites one function body (locals + code) with a charge at entry and after each `loop`.
 * Throws on an instruction it does not know.
 */
const meterBody = (body: Uint8Array, params: number, charge: Uint8Array, bulkCharge: (scratch: number) => Uint8Array): Uint8Array => {
  const r = new Reader(body, 0)
  const localGroups = r.u32()
  const groupsStart = r.pos
  let locals = params
  for (let i = 0; i < localGroups; i++) {
    locals += r.u32()
    r.byte()
  }
  // One extra i32 local holds the byte count a bulk memory instruction is charged for.
  const bulk = bulkCharge(locals)
  const out: Uint8Array[] = [Uint8Array.from(leb(localGroups + 1)), body.subarray(groupsStart, r.pos), Uint8Array.from([0x01, 0x7f]), charge]
  let copied = r.pos
  while (r.pos < body.length) {
    const opStart = r.pos
    const op = r.byte()
    switch (op) {
      case 0x03: // loop bt: charge at the top of every iteration
        skipBlockType(r)
        out.push(body.subarray(copied, r.pos), charge)
        copied = r.pos
        break
      case 0x02:
      case 0x04:
        skipBlockType(r)
        break
      case 0x0c:
      case 0x0d:
      case 0x10:
      case 0x12:
      case 0x20:
      case 0x21:
      case 0x22:
      case 0x23:
      case 0x24:
      case 0x25:
      case 0x26:
      case 0xd2:
        r.u32()
        break
      case 0x0e: {
        const n = r.u32()
        for (let i = 0; i <= n; i++) r.u32()
        break
      }
      case 0x11:
      case 0x13:
        r.u32()
        r.u32()
        break
      case 0x1c: {
        const n = r.u32()
        r.skip(n)
        break
      }
      case 0x3f:
      case 0x40:
        r.u32()
        break
      case 0x41:
        r.skipLeb(5)
        break
      case 0x42:
        r.skipLeb(10)
        break
      case 0x43:
        r.skip(4)
        break
      case 0x44:
        r.skip(8)
        break
      case 0xd0:
        r.byte()
        break
      case 0xfc: {
        const sub = r.u32()
        if (sub <= 7) break
        if (sub === 9 || sub === 13) {
          r.u32() // data.drop, elem.drop
          break
        }
        if (sub !== 8 && sub !== 10 && sub !== 11) throw new Error(`unsupported instruction 0xfc ${sub}`) // table bulk ops
        // memory.init (data, mem), memory.copy (mem, mem), memory.fill (mem): the byte count is
        // on top of the stack; charge it before the instruction runs.
        r.u32()
        if (sub !== 11) r.u32()
        out.push(body.subarray(copied, opStart), bulk)
        copied = opStart
        break
      }
      default:
        if (op === 0x00 || op === 0x01 || op === 0x05 || op === 0x0b || op === 0x0f || op === 0x1a || op === 0x1b || op === 0xd1) break
        if (op >= 0x28 && op <= 0x3e) {
          skipMemarg(r)
          break
        }
        if (op >= 0x45 && op <= 0xc4) break
        throw new Error(`unsupported instruction 0x${op.toString(16)}`)
    }
  }
  out.push(body.subarray(copied))
  return Buffer.concat(out)
}

/** Returns the module with fuel metering and the fuel global exported as `__wk_fuel`. */
export const meterModule = (bytes: Uint8Array): MeterResult => {
  try {
    const r = new Reader(bytes, 8)
    const sections: Array<{ id: number; start: number; end: number; body: Uint8Array }> = []
    while (r.pos < bytes.length) {
      const start = r.pos
      const id = r.byte()
      const size = r.u32()
      const body = bytes.subarray(r.pos, r.pos + size)
      r.skip(size)
      sections.push({ id, start, end: r.pos, body })
    }
    // Globals: imported ones come first in the index space; ours goes after the defined ones.
    let importedGlobals = 0
    const imports = sections.find((s) => s.id === 2)
    if (imports !== undefined) {
      const ir = new Reader(imports.body, 0)
      const n = ir.u32()
      for (let i = 0; i < n; i++) {
        ir.skip(ir.u32())
        ir.skip(ir.u32())
        const kind = ir.byte()
        if (kind === 0x00) ir.u32()
        else if (kind === 0x01) {
          ir.byte()
          const flags = ir.byte()
          ir.u32()
          if (flags & 1) ir.u32()
        } else if (kind === 0x02) {
          const flags = ir.byte()
          ir.u32()
          if (flags & 1) ir.u32()
        } else if (kind === 0x03) {
          ir.skip(2)
          importedGlobals++
        } else throw new Error(`unsupported import kind ${kind}`)
      }
    }
    const globals = sections.find((s) => s.id === 6)
    let definedGlobals = 0
    let globalItems: Uint8Array = new Uint8Array(0)
    if (globals !== undefined) {
      const gr = new Reader(globals.body, 0)
      definedGlobals = gr.u32()
      globalItems = globals.body.subarray(gr.pos)
    }
    const fuel = leb(importedGlobals + definedGlobals)
    // ... global.set f; global.get f; i64.const 1; i64.lt_s; if; unreachable; end
    const check = [0x24, ...fuel, 0x23, ...fuel, 0x42, 0x01, 0x53, 0x04, 0x40, 0x00, 0x0b]
    // global.get f; i64.const 1; i64.sub; <check>
    const charge = Uint8Array.from([0x23, ...fuel, 0x42, 0x01, 0x7d, ...check])
    // [n] local.tee s; global.get f; local.get s; i64.extend_i32_u; i64.const 4; i64.shr_u; i64.sub; <check>  -> [n]
    const bulkCharge = (s: number) => Uint8Array.from([0x22, ...leb(s), 0x23, ...fuel, 0x20, ...leb(s), 0xad, 0x42, 0x04, 0x88, 0x7d, ...check])

    // Parameter counts: locals are indexed after the parameters, so the scratch local needs them.
    const paramsOfType: number[] = []
    const types = sections.find((s) => s.id === 1)
    if (types !== undefined) {
      const tr = new Reader(types.body, 0)
      const n = tr.u32()
      for (let i = 0; i < n; i++) {
        if (tr.byte() !== 0x60) throw new Error("unsupported type form")
        const np = tr.u32()
        tr.skip(np)
        tr.skip(tr.u32())
        paramsOfType.push(np)
      }
    }
    const funcTypes: number[] = []
    const funcs = sections.find((s) => s.id === 3)
    if (funcs !== undefined) {
      const fr = new Reader(funcs.body, 0)
      const n = fr.u32()
      for (let i = 0; i < n; i++) funcTypes.push(fr.u32())
    }
    const newGlobals = section(6, Buffer.concat([Uint8Array.from(leb(definedGlobals + 1)), globalItems, Uint8Array.from([0x7e, 0x01, 0x42, ...sleb(StartFuel), 0x0b])]))

    const exportsSec = sections.find((s) => s.id === 7)
    let exportCount = 0
    let exportItems: Uint8Array = new Uint8Array(0)
    if (exportsSec !== undefined) {
      const er = new Reader(exportsSec.body, 0)
      exportCount = er.u32()
      exportItems = exportsSec.body.subarray(er.pos)
    }
    const name = new TextEncoder().encode(FuelExport)
    const newExports = section(7, Buffer.concat([Uint8Array.from(leb(exportCount + 1)), exportItems, Uint8Array.from([...leb(name.length), ...name, 0x03, ...fuel])]))

    const code = sections.find((s) => s.id === 10)
    if (code === undefined) return { ok: false, detail: "no code section" }
    const cr = new Reader(code.body, 0)
    const nBodies = cr.u32()
    const bodies: Uint8Array[] = []
    for (let i = 0; i < nBodies; i++) {
      const size = cr.u32()
      const params = paramsOfType[funcTypes[i] ?? -1]
      if (params === undefined) throw new Error(`function ${i} has no type`)
      const metered = meterBody(code.body.subarray(cr.pos, cr.pos + size), params, charge, bulkCharge)
      cr.skip(size)
      bodies.push(Buffer.concat([Uint8Array.from(leb(metered.length)), metered]))
    }
    const newCode = section(10, vec(bodies, nBodies))

    // Reassemble in section order, creating the global and export sections where they belong.
    const order = (id: number) => (id === 0 ? -1 : id === 13 ? 5.5 : id === 12 ? 9.5 : id)
    const out: Uint8Array[] = [bytes.subarray(0, 8)]
    let placedGlobals = false
    let placedExports = false
    for (const s of sections) {
      if (!placedGlobals && s.id !== 0 && order(s.id) > 6) {
        out.push(newGlobals)
        placedGlobals = true
      }
      if (!placedExports && s.id !== 0 && order(s.id) > 7) {
        out.push(newExports)
        placedExports = true
      }
      if (s.id === 6 || s.id === 7) continue
      out.push(s.id === 10 ? newCode : bytes.subarray(s.start, s.end))
    }
    if (!placedGlobals) out.push(newGlobals)
    if (!placedExports) out.push(newExports)
    return { ok: true, bytes: Buffer.concat(out) }
  } catch (e) {
    return { ok: false, detail: e instanceof Error ? e.message : String(e) }
  }
}
