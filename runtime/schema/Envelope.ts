import { Schema } from "effect"
import { JsonObject } from "./Json.js"

const Base64 = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9+/]+={0,2}$/), Schema.maxLength(200))

/** A signed request: `sig` is ed25519 over the JCS bytes of `payload`, `key` the signer's public key. */
export const Envelope = Schema.Struct({
  payload: JsonObject,
  key: Base64,
  sig: Base64
})
export type Envelope = typeof Envelope.Type
