import { Schema } from "effect"

const Base64Url = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]+$/, { message: () => "expected base64url without padding" }))

/**
 * A WebAuthn credential registered to a principal (a passkey): its credential id, its COSE public
 * key (ES256 or Ed25519), the relying party it is bound to and the one origin whose pages may use
 * it, and the authenticator's attestation when the registration gave one. Registering one is a
 * new way for the principal to sign: a widening, like a new ed25519 key.
 */
export const PasskeyEntry = Schema.Struct({
  /** The credential id (base64url), as the authenticator returned it. */
  id: Base64Url.pipe(Schema.maxLength(1400)),
  /** The COSE_Key of the credential's public key (standard base64): the `key` of envelopes it signs. */
  public_key: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9+/]+={0,2}$/), Schema.maxLength(200)),
  /** The COSE algorithm: -7 (ES256, P-256) or -8 (EdDSA, Ed25519). */
  alg: Schema.Literal(-7, -8),
  /** The WebAuthn relying party id (`localhost`, `inbox.example.com`): authenticatorData's rpIdHash is its sha256. */
  rp_id: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(253)),
  /** The exact origin (`https://inbox.example.com`) clientDataJSON must name. */
  origin: Schema.String.pipe(Schema.pattern(/^https?:\/\/[^/]+$/, { message: () => "an origin: scheme://host[:port], no path" })),
  /** The registration's attestation, when the authenticator gave one: its format and the attestationObject (base64url). */
  attestation: Schema.optional(Schema.Struct({ fmt: Schema.String, object: Base64Url.pipe(Schema.maxLength(16384)) }))
})
export type PasskeyEntry = typeof PasskeyEntry.Type

/**
 * What a passkey adds to an envelope: the WebAuthn assertion's authenticatorData and
 * clientDataJSON (base64url) and the credential id. The envelope's `sig` is the assertion's
 * signature (standard base64: DER ECDSA for ES256, 64 bytes for Ed25519) and its `key` the
 * credential's COSE public key (runtime/schema/PasskeyAssertion.ts says what is verified).
 */
export const WebAuthnAssertion = Schema.Struct({
  credential_id: Base64Url.pipe(Schema.maxLength(1400)),
  authenticator_data: Base64Url.pipe(Schema.maxLength(4096)),
  client_data_json: Base64Url.pipe(Schema.maxLength(4096))
})
export type WebAuthnAssertion = typeof WebAuthnAssertion.Type
