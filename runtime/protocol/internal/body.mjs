// The checks a request body gets before the kernel trusts it, as plain JavaScript: shared by the
// main thread (Decode.ts and Authenticate.ts, through body.d.mts) and envelopeWorker.mjs, which
// runs without a TypeScript loader. One implementation, so a body checked off the event loop gets
// exactly the verdict it would get on it.
import { createPublicKey, verify } from "node:crypto"
import { jcs } from "../../schema/internal/jcs.mjs"

/** Deepest JSON nesting accepted; deeper bodies are refused before any recursive decoding. */
export const MaxDepth = 64

const decoder = new TextDecoder("utf-8", { fatal: true })
const encoder = new TextEncoder()

/** Maximum bracket depth outside string literals (a linear scan, no recursion). */
const nestingDepth = (text) => {
  let depth = 0
  let max = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 92) i++
      else if (c === 34) inString = false
    } else if (c === 34) inString = true
    else if (c === 123 || c === 91) max = Math.max(max, ++depth)
    else if (c === 125 || c === 93) depth--
  }
  return max
}

/** Parses a body as JSON: `{ok: true, value}`, or `{ok: false, message}` when it is not UTF-8, nests too deep or is not JSON. */
export const parseJsonBody = (data) => {
  let text
  try {
    text = decoder.decode(data)
  } catch {
    return { ok: false, message: "request body is not valid UTF-8" }
  }
  if (nestingDepth(text) > MaxDepth) return { ok: false, message: `request nests deeper than ${MaxDepth} levels` }
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch (e) {
    return { ok: false, message: `request body is not JSON: ${e.message}` }
  }
}

const isObject = (v) => typeof v === "object" && v !== null && !Array.isArray(v)

/**
 * The envelope's outline: `key`, `sig`, and of `payload` only `op` and `principal` (what
 * authentication reads), never the rest of a possibly large body.
 */
export const envelopeHead = (value) => {
  if (!isObject(value)) return Array.isArray(value) ? [] : typeof value === "object" || typeof value === "string" ? null : value
  const p = value.payload
  return { payload: isObject(p) ? { op: p.op, principal: p.principal } : Array.isArray(p) ? [] : typeof p === "object" || typeof p === "string" ? null : p, key: value.key, sig: value.sig }
}

const SpkiPrefix = Buffer.from("302a300506032b6570032100", "hex")
const keys = new Map()
const publicKey = (raw) => {
  const id = raw.toString("base64")
  let k = keys.get(id)
  if (k === undefined) {
    k = createPublicKey({ key: Buffer.concat([SpkiPrefix, raw]), format: "der", type: "spki" })
    if (keys.size > 4096) keys.clear()
    keys.set(id, k)
  }
  return k
}

/** Whether `sig` (base64) is an ed25519 signature over the JCS bytes of `payload` under `key` (base64). */
export const envelopeSignatureValid = (payload, key, sig) => {
  try {
    if (typeof key !== "string" || typeof sig !== "string") return false
    const k = Buffer.from(key, "base64")
    const s = Buffer.from(sig, "base64")
    if (k.length !== 32 || s.length !== 64) return false
    return verify(null, encoder.encode(jcs(payload)), publicKey(k), s)
  } catch {
    return false
  }
}
