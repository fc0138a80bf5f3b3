import { HttpIncomingMessage, HttpServerRequest } from "@effect/platform"
import { Effect, Either, Option, type Schema } from "effect"
import { decodeEnvelope, parseBody } from "../protocol/Decode.js"
import { decodeWith } from "../schema/DecodeWith.js"
import type { Reply } from "../protocol/Replies.js"
import { invalidRequest } from "../protocol/Replies.js"
import { MaxRequestBytes } from "../schema/Subjects.js"

/** A signed body checked at the edge: the raw bytes to forward and the decoded payload. */
export interface CheckedBody<P> {
  readonly bytes: Uint8Array
  readonly payload: P
}

/**
 * Reads a request body (at most MaxRequestBytes), and decodes it as a signed envelope whose
 * payload matches `schema`, so a malformed request gets its 400 naming the field here. The
 * kernel still authenticates and decides; the gateway forwards the bytes untouched.
 */
export const signedBody = <A, I>(schema: Schema.Schema<A, I>, heldId?: string) =>
  Effect.gen(function* () {
    const req = yield* HttpServerRequest.HttpServerRequest
    const declared = Number(req.headers["content-length"] ?? "0")
    if (declared > MaxRequestBytes) return Either.left(invalidRequest(`request is ${declared} bytes; the limit is ${MaxRequestBytes}`, "")) as Either.Either<CheckedBody<A>, Reply>
    // A chunked body has no length to check up front: the platform stops reading past the limit.
    const buf = yield* req.arrayBuffer.pipe(HttpIncomingMessage.withMaxBodySize(Option.some(MaxRequestBytes + 1)), Effect.either)
    if (Either.isLeft(buf)) return Either.left(invalidRequest(`request body could not be read (the limit is ${MaxRequestBytes} bytes)`, ""))
    const bytes = new Uint8Array(buf.right)
    return Either.gen(function* () {
      const body = yield* parseBody(bytes)
      const envelope = yield* decodeEnvelope(body)
      const payload = yield* decodeWith(schema, envelope.payload, "payload")
      if (heldId !== undefined && (payload as { held_id?: string }).held_id !== heldId) {
        return yield* Either.left(invalidRequest(`payload.held_id must be the held_id in the path (${heldId})`, "payload.held_id"))
      }
      return { bytes, payload }
    })
  })
