import nacl from "tweetnacl"
import { Either } from "effect"
import type { Envelope } from "../schema/Envelope.js"
import { canonicalize } from "../schema/Canonical.js"
import { ed25519Sign, ed25519Verify } from "../schema/Ed25519.js"
import type { ActivePolicy } from "../policy/ActivePolicy.js"
import { unauthenticated, type Reply } from "./Replies.js"

/**
 * Checks a signed envelope: `op` matches the subject, `key` is registered to
 * `payload.principal`, and `sig` is a valid ed25519 signature over JCS(payload).
 */
export const authenticate = (env: Envelope, op: string, policy: ActivePolicy): Either.Either<Envelope, Reply> => {
  const principal = env.payload["principal"]
  if (env.payload["op"] !== op) return Either.left(unauthenticated(`payload.op must be '${op}' on this subject`))
  if (typeof principal !== "string") return Either.left(unauthenticated("payload.principal is missing"))
  const entry = policy.principals.get(principal)
  if (entry === undefined) return Either.left(unauthenticated(`principal '${principal}' is not registered`))
  if (!entry.keys.includes(env.key)) return Either.left(unauthenticated(`key is not registered to principal '${principal}'`))
  return verifySignature(env) ? Either.right(env) : Either.left(unauthenticated("signature does not verify over the JCS of payload"))
}

/** ed25519 verification of `sig` over the JCS bytes of `payload` under `key` (native; tweetnacl-compatible). */
export const verifySignature = (env: Envelope): boolean => {
  try {
    const key = Buffer.from(env.key, "base64")
    const sig = Buffer.from(env.sig, "base64")
    if (key.length !== nacl.sign.publicKeyLength || sig.length !== nacl.sign.signatureLength) return false
    return ed25519Verify(new TextEncoder().encode(canonicalize(env.payload)), sig, key)
  } catch {
    return false
  }
}

/** Signs a payload into an envelope (used by the client library and tests). */
export const signEnvelope = (payload: Record<string, unknown>, secretKey: Uint8Array): Envelope => {
  const kp = nacl.sign.keyPair.fromSecretKey(secretKey)
  const sig = ed25519Sign(new TextEncoder().encode(canonicalize(payload)), secretKey)
  return {
    payload: payload as Envelope["payload"],
    key: Buffer.from(kp.publicKey).toString("base64"),
    sig: Buffer.from(sig).toString("base64")
  }
}
