import nacl from "tweetnacl"
import type { Envelope } from "./Envelope.js"
import { canonicalize } from "./Canonical.js"
import { ed25519Sign, ed25519Verify } from "./Ed25519.js"
import { verifyPasskeyAssertion } from "./PasskeyAssertion.js"

const encoder = new TextEncoder()

/**
 * ed25519 verification of an envelope's `sig` over the JCS bytes of its `payload` under its `key`
 * (both base64); for a passkey's envelope (`webauthn`), its assertion over the payload's digest
 * (PasskeyAssertion.ts). False for anything that is not a valid signature, never a throw: the one
 * check the client, the gateway and the auditor share with the kernel's request path.
 */
export const envelopeSignatureValid = (env: Envelope): boolean => {
  if (env.webauthn !== undefined) return verifyPasskeyAssertion(env).ok
  try {
    return ed25519Verify(encoder.encode(canonicalize(env.payload)), Buffer.from(env.sig, "base64"), Buffer.from(env.key, "base64"))
  } catch {
    return false
  }
}

/** Signs a payload into an envelope: `sig` is ed25519 over JCS(payload), `key` the public key. */
export const signEnvelope = (payload: Record<string, unknown>, secretKey: Uint8Array): Envelope => {
  const kp = nacl.sign.keyPair.fromSecretKey(secretKey)
  const sig = ed25519Sign(encoder.encode(canonicalize(payload)), secretKey)
  return {
    payload: payload as Envelope["payload"],
    key: Buffer.from(kp.publicKey).toString("base64"),
    sig: Buffer.from(sig).toString("base64")
  }
}
