// A small JSON value model with a strict parser and a serializer, for stage inputs and outputs.
// AssemblyScript has no exceptions: parse returns null on malformed text.

export const KIND_NULL: i32 = 0
export const KIND_BOOL: i32 = 1
export const KIND_NUM: i32 = 2
export const KIND_STR: i32 = 3
export const KIND_ARR: i32 = 4
export const KIND_OBJ: i32 = 5

/** A JSON value. Use the `is*`/`as*` helpers or the typed getters on `JObj`. */
export class JValue {
  constructor(public kind: i32) {}
  isNull(): bool { return this.kind == KIND_NULL }
  isBool(): bool { return this.kind == KIND_BOOL }
  isNum(): bool { return this.kind == KIND_NUM }
  isStr(): bool { return this.kind == KIND_STR }
  isArr(): bool { return this.kind == KIND_ARR }
  isObj(): bool { return this.kind == KIND_OBJ }
  asBool(): JBool { return changetype<JBool>(this) }
  asNum(): JNum { return changetype<JNum>(this) }
  asStr(): JStr { return changetype<JStr>(this) }
  asArr(): JArr { return changetype<JArr>(this) }
  asObj(): JObj { return changetype<JObj>(this) }
  /** Serializes this value as compact JSON text. */
  stringify(): string {
    const out = new Array<string>()
    writeValue(this, out)
    return out.join("")
  }
}

export class JNull extends JValue {
  constructor() { super(KIND_NULL) }
}

export class JBool extends JValue {
  constructor(public value: bool) { super(KIND_BOOL) }
}

export class JNum extends JValue {
  constructor(public value: f64) { super(KIND_NUM) }
}

export class JStr extends JValue {
  constructor(public value: string) { super(KIND_STR) }
}

export class JArr extends JValue {
  items: Array<JValue> = new Array<JValue>()
  constructor() { super(KIND_ARR) }
  push(v: JValue): JArr { this.items.push(v); return this }
  get length(): i32 { return this.items.length }
  at(i: i32): JValue { return this.items[i] }
}

/** A JSON object; keys keep insertion order, a later `set` of the same key replaces the value. */
export class JObj extends JValue {
  keys: Array<string> = new Array<string>()
  values: Array<JValue> = new Array<JValue>()
  constructor() { super(KIND_OBJ) }

  set(key: string, v: JValue): JObj {
    const i = this.keys.indexOf(key)
    if (i >= 0) this.values[i] = v
    else { this.keys.push(key); this.values.push(v) }
    return this
  }
  setStr(key: string, v: string): JObj { return this.set(key, new JStr(v)) }
  setNum(key: string, v: f64): JObj { return this.set(key, new JNum(v)) }
  setBool(key: string, v: bool): JObj { return this.set(key, new JBool(v)) }
  has(key: string): bool { return this.keys.indexOf(key) >= 0 }
  /** The value under `key`, or null when absent. */
  get(key: string): JValue | null {
    const i = this.keys.indexOf(key)
    return i < 0 ? null : this.values[i]
  }
  /** The string under `key`, or `fallback` when absent or not a string. */
  getStr(key: string, fallback: string = ""): string {
    const v = this.get(key)
    return v !== null && v.isStr() ? v.asStr().value : fallback
  }
  /** The number under `key`, or `fallback` when absent or not a number. */
  getNum(key: string, fallback: f64 = NaN): f64 {
    const v = this.get(key)
    return v !== null && v.isNum() ? v.asNum().value : fallback
  }
  getBool(key: string, fallback: bool = false): bool {
    const v = this.get(key)
    return v !== null && v.isBool() ? v.asBool().value : fallback
  }
  /** The object under `key`, or an empty object when absent or not an object. */
  getObj(key: string): JObj {
    const v = this.get(key)
    return v !== null && v.isObj() ? v.asObj() : new JObj()
  }
  /** The array under `key`, or an empty array when absent or not an array. */
  getArr(key: string): JArr {
    const v = this.get(key)
    return v !== null && v.isArr() ? v.asArr() : new JArr()
  }
}

/** Parses JSON text; null when the text is not exactly one JSON value. */
export function parse(text: string): JValue | null {
  const p = new Parser(text)
  p.ws()
  const v = p.value(0)
  if (v === null) return null
  p.ws()
  return p.pos == text.length ? v : null
}

const MAX_DEPTH: i32 = 64

class Parser {
  pos: i32 = 0
  constructor(public s: string) {}

  ws(): void {
    while (this.pos < this.s.length) {
      const c = this.s.charCodeAt(this.pos)
      if (c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0d) this.pos++
      else break
    }
  }

  value(depth: i32): JValue | null {
    if (depth > MAX_DEPTH || this.pos >= this.s.length) return null
    const c = this.s.charCodeAt(this.pos)
    if (c == 0x7b) return this.object(depth)
    if (c == 0x5b) return this.array(depth)
    if (c == 0x22) {
      const str = this.string()
      return str === null ? null : new JStr(str)
    }
    if (c == 0x74) return this.word("true") ? new JBool(true) : null
    if (c == 0x66) return this.word("false") ? new JBool(false) : null
    if (c == 0x6e) return this.word("null") ? new JNull() : null
    return this.number()
  }

  word(w: string): bool {
    if (this.s.substr(this.pos, w.length) != w) return false
    this.pos += w.length
    return true
  }

  object(depth: i32): JValue | null {
    const o = new JObj()
    this.pos++
    this.ws()
    if (this.pos < this.s.length && this.s.charCodeAt(this.pos) == 0x7d) { this.pos++; return o }
    while (true) {
      this.ws()
      if (this.pos >= this.s.length || this.s.charCodeAt(this.pos) != 0x22) return null
      const k = this.string()
      if (k === null) return null
      this.ws()
      if (this.pos >= this.s.length || this.s.charCodeAt(this.pos) != 0x3a) return null
      this.pos++
      this.ws()
      const v = this.value(depth + 1)
      if (v === null) return null
      o.set(k, v)
      this.ws()
      if (this.pos >= this.s.length) return null
      const c = this.s.charCodeAt(this.pos)
      this.pos++
      if (c == 0x2c) continue
      if (c == 0x7d) return o
      return null
    }
  }

  array(depth: i32): JValue | null {
    const a = new JArr()
    this.pos++
    this.ws()
    if (this.pos < this.s.length && this.s.charCodeAt(this.pos) == 0x5d) { this.pos++; return a }
    while (true) {
      this.ws()
      const v = this.value(depth + 1)
      if (v === null) return null
      a.push(v)
      this.ws()
      if (this.pos >= this.s.length) return null
      const c = this.s.charCodeAt(this.pos)
      this.pos++
      if (c == 0x2c) continue
      if (c == 0x5d) return a
      return null
    }
  }

  string(): string | null {
    this.pos++
    const parts = new Array<string>()
    let start = this.pos
    while (this.pos < this.s.length) {
      const c = this.s.charCodeAt(this.pos)
      if (c == 0x22) {
        parts.push(this.s.substring(start, this.pos))
        this.pos++
        return parts.join("")
      }
      if (c < 0x20) return null
      if (c == 0x5c) {
        parts.push(this.s.substring(start, this.pos))
        this.pos++
        if (this.pos >= this.s.length) return null
        const e = this.s.charCodeAt(this.pos)
        this.pos++
        if (e == 0x22) parts.push("\"")
        else if (e == 0x5c) parts.push("\\")
        else if (e == 0x2f) parts.push("/")
        else if (e == 0x62) parts.push("\b")
        else if (e == 0x66) parts.push("\f")
        else if (e == 0x6e) parts.push("\n")
        else if (e == 0x72) parts.push("\r")
        else if (e == 0x74) parts.push("\t")
        else if (e == 0x75) {
          if (this.pos + 4 > this.s.length) return null
          let code: i32 = 0
          for (let i = 0; i < 4; i++) {
            const h = hexValue(this.s.charCodeAt(this.pos + i))
            if (h < 0) return null
            code = (code << 4) | h
          }
          this.pos += 4
          parts.push(String.fromCharCode(code))
        } else return null
        start = this.pos
        continue
      }
      this.pos++
    }
    return null
  }

  number(): JValue | null {
    const start = this.pos
    if (this.pos < this.s.length && this.s.charCodeAt(this.pos) == 0x2d) this.pos++
    if (!this.digits()) return null
    if (this.pos < this.s.length && this.s.charCodeAt(this.pos) == 0x2e) {
      this.pos++
      if (!this.digits()) return null
    }
    if (this.pos < this.s.length) {
      const c = this.s.charCodeAt(this.pos)
      if (c == 0x65 || c == 0x45) {
        this.pos++
        if (this.pos < this.s.length) {
          const sign = this.s.charCodeAt(this.pos)
          if (sign == 0x2b || sign == 0x2d) this.pos++
        }
        if (!this.digits()) return null
      }
    }
    return new JNum(parseFloat(this.s.substring(start, this.pos)))
  }

  digits(): bool {
    const start = this.pos
    while (this.pos < this.s.length) {
      const c = this.s.charCodeAt(this.pos)
      if (c < 0x30 || c > 0x39) break
      this.pos++
    }
    return this.pos > start
  }
}

function hexValue(c: i32): i32 {
  if (c >= 0x30 && c <= 0x39) return c - 0x30
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10
  return -1
}

function writeValue(v: JValue, out: Array<string>): void {
  if (v.kind == KIND_NULL) out.push("null")
  else if (v.kind == KIND_BOOL) out.push(v.asBool().value ? "true" : "false")
  else if (v.kind == KIND_NUM) out.push(numberText(v.asNum().value))
  else if (v.kind == KIND_STR) out.push(quote(v.asStr().value))
  else if (v.kind == KIND_ARR) {
    const a = v.asArr()
    out.push("[")
    for (let i = 0; i < a.items.length; i++) {
      if (i > 0) out.push(",")
      writeValue(a.items[i], out)
    }
    out.push("]")
  } else {
    const o = v.asObj()
    out.push("{")
    for (let i = 0; i < o.keys.length; i++) {
      if (i > 0) out.push(",")
      out.push(quote(o.keys[i]))
      out.push(":")
      writeValue(o.values[i], out)
    }
    out.push("}")
  }
}

/** JSON text of a number; integers print without a fraction, non-finite values as null. */
export function numberText(n: f64): string {
  if (!isFinite(n)) return "null"
  if (n == Math.floor(n) && Math.abs(n) < 9007199254740992.0) return (<i64>n).toString()
  return n.toString()
}

/** A JSON string literal for `s`. */
export function quote(s: string): string {
  const parts = new Array<string>()
  parts.push("\"")
  let start = 0
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    let esc: string | null = null
    if (c == 0x22) esc = "\\\""
    else if (c == 0x5c) esc = "\\\\"
    else if (c == 0x0a) esc = "\\n"
    else if (c == 0x0d) esc = "\\r"
    else if (c == 0x09) esc = "\\t"
    else if (c < 0x20) esc = "\\u00" + (c < 0x10 ? "0" : "") + c.toString(16)
    if (esc !== null) {
      parts.push(s.substring(start, i))
      parts.push(esc)
      start = i + 1
    }
  }
  parts.push(s.substring(start))
  parts.push("\"")
  return parts.join("")
}
