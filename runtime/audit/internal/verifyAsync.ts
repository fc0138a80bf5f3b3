import { createPublicKey, verify, type KeyObject } from "node:crypto"
import { canonicalize } from "../../schema/Canonical.js"
import type { Envelope } from "../../schema/Envelope.js"

// RFC 8410 SPKI prefix for a raw Ed25519 public key (as runtime/schema/Ed25519.ts).
const SpkiPrefix = Buffer.from("302a300506032b6570032100", "hex")
const keys = new Map<string, KeyObject | null>()
const encoder = new TextEncoder()

const keyOf = (b64: string): KeyObject | null => {
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

/**
 * Verifies an envelope's ed25519 signature over JCS(payload) on libuv's thread pool (Node's
 * callback form of `crypto.verify`), so verification overlaps with reading and folding.
 * Same verdicts as `verifySignature`.
 */
export const verifyEnvelopeAsync = (env: Envelope): Promise<boolean> => {
  const key = keyOf(env.key)
  const sig = Buffer.from(env.sig, "base64")
  if (key === null || sig.length !== 64) return Promise.resolve(false)
  const message = encoder.encode(canonicalize(env.payload))
  return new Promise((resolve) => {
    try {
      verify(null, message, key, sig, (err, ok) => resolve(err === null && ok))
    } catch {
      resolve(false)
    }
  })
}
