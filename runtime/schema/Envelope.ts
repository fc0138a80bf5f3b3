import { Schema } from "effect"
import { JsonObject } from "./Json.js"
import { WebAuthnAssertion } from "./Passkey.js"

const Base64 = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9+/]+={0,2}$/), Schema.maxLength(200))

/**
 * A signed request: `sig` is ed25519 over the JCS bytes of `payload`, `key` the signer's public
 * key. With `webauthn` it is a passkey's assertion instead: `key` the credential's COSE public key,
 * `sig` its signature over authenticatorData and the hash of clientDataJSON, whose challenge is
 * the digest of `payload` (runtime/schema/PasskeyAssertion.ts).
 */
export const Envelope = Schema.Struct({
  payload: JsonObject,
  key: Base64,
  sig: Base64,
  webauthn: Schema.optional(WebAuthnAssertion)
})
export type Envelope = typeof Envelope.Type
