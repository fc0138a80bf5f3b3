import { Either, Schema } from "effect"
import { sha256Hex } from "./Canonical.js"

/**
 * A kernel-kept continuation: the agent's checkpoint for the turn a call parks (the seed's
 * `continuation_ref`, "durable checkpoint, not raw provider state"). The signed proposal names
 * its sha256 (`payload.continuation_digest`); the bytes travel beside the envelope in the request
 * body (`continuation`, base64), so the signature binds them while the event log keeps only the
 * digest. The kernel stores them in the object store `wk_continuations` under their digest and
 * returns them with the call's delivery.
 */

/** The largest continuation the kernel keeps, in bytes (decoded). */
export const MaxContinuationBytes = 64 * 1024

/** The object store bucket that keeps continuations by digest. */
export const ContinuationBucket = "wk_continuations"

/** The object a continuation is stored under. */
export const continuationObject = (digest: string): string => `continuation/${digest}`

/** A continuation's digest: lowercase sha256 hex of its bytes. */
export const ContinuationDigest = Schema.String.pipe(Schema.pattern(/^[0-9a-f]{64}$/, { message: () => "expected the sha256 hex of the continuation's bytes" }))

/** What a delivery carries of the call's continuation: its digest, and its bytes (base64), or null when the store no longer holds them. */
export const DeliveredContinuation = Schema.Struct({ digest: ContinuationDigest, data: Schema.NullOr(Schema.String) })
export type DeliveredContinuation = typeof DeliveredContinuation.Type

/** Why a request's continuation is refused: the field and the reason. */
export interface ContinuationRefusal {
  readonly path: string
  readonly message: string
}

const Base64 = /^[A-Za-z0-9+/]*={0,2}$/

/**
 * Checks a request's continuation against the digest its signed payload names: present exactly
 * when named, base64, at most `MaxContinuationBytes`, hashing to the digest. Pure.
 */
export const checkContinuation = (digest: string | undefined, body: unknown): Either.Either<Uint8Array | undefined, ContinuationRefusal> => {
  const raw = typeof body === "object" && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>)["continuation"] : undefined
  if (raw === undefined) {
    return digest === undefined ? Either.right(undefined) : Either.left({ path: "continuation", message: "payload.continuation_digest names a continuation the request does not carry (continuation, base64, beside the envelope)" })
  }
  if (digest === undefined) return Either.left({ path: "continuation", message: "a continuation must be bound by the signed payload's continuation_digest" })
  if (typeof raw !== "string" || !Base64.test(raw) || raw.length % 4 !== 0) return Either.left({ path: "continuation", message: "expected the continuation's bytes as base64" })
  // Refused before decoding when even the encoded length is over the bound.
  const size = (raw.length / 4) * 3 - (raw.endsWith("==") ? 2 : raw.endsWith("=") ? 1 : 0)
  if (size > MaxContinuationBytes) return Either.left({ path: "continuation", message: `continuation is ${size} bytes, over the bound of ${MaxContinuationBytes}` })
  const bytes = new Uint8Array(Buffer.from(raw, "base64"))
  const actual = sha256Hex(bytes)
  if (actual !== digest) return Either.left({ path: "continuation", message: `continuation hashes to ${actual}, not the signed continuation_digest ${digest}` })
  return Either.right(bytes)
}
