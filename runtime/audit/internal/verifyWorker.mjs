// Signature verification off the main thread for audit replay: receives batches of raw event
// messages, answers [seq, verdict] for each. Same rule as verifySignature in
// runtime/protocol/Authenticate.ts: ed25519 over the JCS (RFC 8785) bytes of envelope.payload.
import { parentPort } from "node:worker_threads"
import { createPublicKey, verify } from "node:crypto"
import canonicalize from "canonicalize"

const SpkiPrefix = Buffer.from("302a300506032b6570032100", "hex")
const keys = new Map()
const text = new TextDecoder()
const encoder = new TextEncoder()

const keyOf = (b64) => {
  let k = keys.get(b64)
  if (k === undefined) {
    const raw = Buffer.from(b64, "base64")
    try {
      k = raw.length === 32 ? createPublicKey({ key: Buffer.concat([SpkiPrefix, raw]), format: "der", type: "spki" }) : null
    } catch {
      k = null
    }
    if (keys.size > 4096) keys.clear()
    keys.set(b64, k)
  }
  return k
}

const verdict = (data) => {
  try {
    const env = JSON.parse(text.decode(data)).envelope
    if (typeof env !== "object" || env === null || typeof env.key !== "string" || typeof env.sig !== "string") return false
    const key = keyOf(env.key)
    const sig = Buffer.from(env.sig, "base64")
    if (key === null || sig.length !== 64) return false
    const message = canonicalize(env.payload)
    if (message === undefined) return false
    return verify(null, encoder.encode(message), key, sig)
  } catch {
    return false
  }
}

parentPort.on("message", (batch) => {
  parentPort.postMessage(batch.map(([seq, data]) => [seq, verdict(data)]))
})
