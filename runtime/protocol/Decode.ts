import { Either, Schema } from "effect"
import { WebAuthnAssertion } from "../schema/Passkey.js"
import type { Envelope } from "../schema/Envelope.js"
import { MaxRequestBytes } from "../schema/Subjects.js"
import { decodeWith } from "../schema/DecodeWith.js"
import { invalidRequest, unauthenticated, type Reply } from "./Replies.js"
import { MaxDepth, parseJsonBody } from "./internal/body.mjs"

export { MaxDepth }

/** The size check, first and free: an oversized body is refused before a byte of it is read. */
export const checkSize = (data: Uint8Array): Either.Either<Uint8Array, Reply> =>
  data.length > MaxRequestBytes ? Either.left(invalidRequest(`request is ${data.length} bytes; the limit is ${MaxRequestBytes}`, "")) : Either.right(data)

/** Parses a request body as JSON, refusing oversized, non-UTF-8, too deep or non-JSON bodies. */
export const parseBody = (data: Uint8Array): Either.Either<unknown, Reply> =>
  Either.flatMap(checkSize(data), (d) => {
    const parsed = parseJsonBody(d)
    return parsed.ok ? Either.right(parsed.value) : Either.left(invalidRequest(parsed.message, ""))
  })

const Base64 = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9+/]+={0,2}$/), Schema.maxLength(200))

/**
 * The envelope's shape without its contents: `payload` is an object, `key` and `sig` base64.
 * Nothing below `payload` is walked here: that waits until the signature verified, so an
 * unauthenticated body costs no deep decoding. (A parsed body holds only JSON values.)
 */
const EnvelopeShape = Schema.Struct({
  payload: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  key: Base64,
  sig: Base64,
  webauthn: Schema.optional(WebAuthnAssertion)
})

/** Checks a parsed envelope's shape; an envelope without key or signature is unauthenticated, not malformed. */
export const decodeEnvelope = (value: unknown): Either.Either<Envelope, Reply> => {
  if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    const v = value as Record<string, unknown>
    if (v["sig"] === undefined || v["key"] === undefined) return Either.left(unauthenticated("request is not signed: an envelope needs 'key' and 'sig'"))
  }
  return Either.map(decodeWith(EnvelopeShape, value), (e) => e as Envelope)
}
