import { Either } from "effect"
import type { Envelope } from "../schema/Envelope.js"
import { envelopeSignatureValid } from "./internal/body.mjs"
import type { ActivePolicy } from "../policy/ActivePolicy.js"
import { unauthenticated, type Reply } from "./Replies.js"
import { authenticatePasskey } from "./AuthenticatePasskey.js"

/**
 * Checks a signed envelope: `op` matches the subject, `key` is registered to
 * `payload.principal`, and `sig` is a valid ed25519 signature over JCS(payload). The cheap
 * checks come first; `verified` (by default `verifySignature(env)`) is asked last, and only
 * for a registered key.
 */
export const authenticate = (env: Envelope, op: string, policy: ActivePolicy, verified: () => boolean = () => verifySignature(env)): Either.Either<Envelope, Reply> => {
  const principal = env.payload["principal"]
  if (env.payload["op"] !== op) return Either.left(unauthenticated(`payload.op must be '${op}' on this subject`))
  if (typeof principal !== "string") return Either.left(unauthenticated("payload.principal is missing"))
  const entry = policy.principals.get(principal)
  if (entry === undefined) return Either.left(unauthenticated(`principal '${principal}' is not registered`))
  if (env.webauthn !== undefined) return authenticatePasskey(env, op, entry)
  if (!entry.keys.includes(env.key)) return Either.left(unauthenticated(`key is not registered to principal '${principal}'`))
  return verified() ? Either.right(env) : Either.left(unauthenticated("signature does not verify over the JCS of payload"))
}

/** ed25519 verification of `sig` over the JCS bytes of `payload` under `key` (native; tweetnacl-compatible). */
export const verifySignature = (env: Envelope): boolean => envelopeSignatureValid(env.payload, env.key, env.sig)
