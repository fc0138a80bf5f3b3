import { Either } from "effect"
import type { Envelope } from "../schema/Envelope.js"
import type { PrincipalEntry } from "../schema/Profile.js"
import { passkeyBoundTo, registeredPasskey, verifyPasskeyAssertion, type PasskeyAssertion } from "../schema/PasskeyAssertion.js"
import { unauthenticated, type Reply } from "./Replies.js"

/** The operations a passkey may sign: a person's decision about a held call. */
export const PasskeyOps: ReadonlySet<string> = new Set(["attest"])

/**
 * Authenticates a passkey's envelope for `op`: an op a passkey may sign, a credential registered
 * to the principal (its id and COSE key), a valid assertion over the payload's digest with user
 * verification (schema/PasskeyAssertion.ts), made on the registered origin for the registered rp
 * id. The signature counter is judged after this, against the counter store (protocol/Attest.ts).
 */
export const authenticatePasskey = (env: Envelope, op: string, entry: PrincipalEntry): Either.Either<Envelope, Reply> => {
  const checked = checkPasskey(env, op, entry)
  return Either.isRight(checked) ? Either.right(env) : Either.left(checked.left)
}

/** As `authenticatePasskey`, answering the verified assertion (its counter, for the counter store). */
export const checkPasskey = (env: Envelope, op: string, entry: PrincipalEntry): Either.Either<PasskeyAssertion, Reply> => {
  if (!PasskeyOps.has(op)) return Either.left(unauthenticated(`a passkey signs only ${[...PasskeyOps].join(", ")}, not '${op}'`))
  const principal = String(env.payload["principal"])
  const passkey = registeredPasskey(entry.passkeys, env)
  if (passkey === undefined) return Either.left(unauthenticated(`passkey ${env.webauthn!.credential_id} is not registered to principal '${principal}'`))
  const verdict = verifyPasskeyAssertion(env)
  if (!verdict.ok) return Either.left(unauthenticated(verdict.reason))
  const unbound = passkeyBoundTo(verdict.assertion, env.key, passkey)
  return unbound === null ? Either.right(verdict.assertion) : Either.left(unauthenticated(unbound))
}
