// Signature verification off the main thread for audit replay: receives batches of raw commit
// messages (bodies back to back in one buffer, `ends[i]` where body i ends), answers one byte per
// message: 1 every envelope of the commit's events verifies, 0 one does not (or the body is not a
// commit), 2 no event of the commit has an envelope. Same rule as verifySignature in
// runtime/protocol/Authenticate.ts: ed25519 over the JCS (RFC 8785) bytes of envelope.payload.
import { parentPort } from "node:worker_threads"
import { createPublicKey, verify } from "node:crypto"
import { jcs } from "../../schema/internal/jcs.mjs"

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

const verifies = (env) => {
  if (typeof env !== "object" || env === null || typeof env.key !== "string" || typeof env.sig !== "string") return false
  const key = keyOf(env.key)
  const sig = Buffer.from(env.sig, "base64")
  if (key === null || sig.length !== 64) return false
  return verify(null, encoder.encode(jcs(env.payload)), key, sig)
}

const verdict = (data) => {
  try {
    const body = JSON.parse(text.decode(data))
    if (typeof body !== "object" || body === null || !Array.isArray(body.events)) return 0
    let any = false
    for (const event of body.events) {
      if (typeof event !== "object" || event === null || !("envelope" in event) || event.envelope === undefined) continue
      any = true
      if (!verifies(event.envelope)) return 0
    }
    return any ? 1 : 2
  } catch {
    return 0
  }
}

parentPort.on("message", ({ seqs, ends, bytes }) => {
  const answers = new Uint8Array(seqs.length)
  let start = 0
  for (let i = 0; i < seqs.length; i++) {
    answers[i] = verdict(bytes.subarray(start, ends[i]))
    start = ends[i]
  }
  parentPort.postMessage(answers, [answers.buffer])
})
