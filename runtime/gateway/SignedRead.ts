import { HttpServerRequest } from "@effect/platform"
import { Context, Effect, Either, Layer } from "effect"
import { verifySignature } from "../protocol/Authenticate.js"
import { decodeEnvelope } from "../protocol/Decode.js"
import { decodeWith } from "../schema/DecodeWith.js"
import { unauthenticated, type Reply } from "../protocol/Replies.js"
import type { Envelope } from "../schema/Envelope.js"
import { ReadPayload } from "../schema/Requests.js"

/** The `Authorization` scheme of a signed read: `WK-Read <base64 of the JSON envelope>`. */
export const ReadScheme = "WK-Read"

/** How far a signed read's `issued_at` may be from the gateway's clock, either way. */
export const ReadSkewMs = 60_000

/**
 * Nonces of signed reads seen within the skew window: a read header is good once. Entries older
 * than the window are forgotten (a header that old is refused for its time anyway).
 */
export class ReadNonces extends Context.Tag("wk/gateway/ReadNonces")<ReadNonces, { readonly firstUse: (principal: string, nonce: string, nowMs: number) => boolean }>() {
  static readonly layer = Layer.sync(ReadNonces, () => {
    const seen = new Map<string, number>()
    let sweptAt = 0
    return {
      firstUse: (principal, nonce, nowMs) => {
        if (nowMs - sweptAt > ReadSkewMs) {
          for (const [k, at] of seen) if (nowMs - at > 2 * ReadSkewMs) seen.delete(k)
          sweptAt = nowMs
        }
        const key = `${principal}\u0000${nonce}`
        if (seen.has(key)) return false
        seen.set(key, nowMs)
        return true
      }
    }
  })
}

const refuse = (message: string): Either.Either<Envelope, Reply> => Either.left(unauthenticated(message))

/** A 400's message and field, as one line for a refused header. */
const why = (reply: Reply) => {
  const e = reply["error"] as { message: string; path?: string }
  return `Authorization: ${e.message}${e.path ? ` (${e.path})` : ""}`
}

/**
 * The signed read of this request, checked at the edge: a `WK-Read` envelope with `op: "read"`
 * whose signature verifies, that names this request's method and path (query included), is
 * within ReadSkewMs of now and whose nonce this gateway has not seen. The kernel then checks the
 * read again (what it names, the key's registration, the signature), accepts its nonce once
 * across every gateway and kernel (protocol/ReadProof.ts) and decides what the principal may see.
 */
export const signedRead = Effect.gen(function* () {
  const req = yield* HttpServerRequest.HttpServerRequest
  const nonces = yield* ReadNonces
  const header = req.headers["authorization"] ?? ""
  if (!header.startsWith(`${ReadScheme} `)) return refuse(`reads are signed: send Authorization: ${ReadScheme} <base64 of a signed {op: "read", principal, method, path, issued_at, nonce} envelope>`)
  let body: unknown
  try {
    body = JSON.parse(Buffer.from(header.slice(ReadScheme.length + 1).trim(), "base64").toString("utf8"))
  } catch {
    return refuse(`Authorization: ${ReadScheme} must carry the base64 of a JSON envelope`)
  }
  const envelope = decodeEnvelope(body)
  if (Either.isLeft(envelope)) return refuse(why(envelope.left))
  const payload = decodeWith(ReadPayload, envelope.right.payload, "payload")
  if (Either.isLeft(payload)) return refuse(why(payload.left))
  const p = payload.right
  if (!verifySignature(envelope.right)) return refuse("Authorization: the signature does not verify over the JCS of payload")
  if (p.method !== req.method || p.path !== req.url) return refuse(`Authorization: payload.method and payload.path must be this request's (${req.method} ${req.url})`)
  const now = Date.now()
  if (Math.abs(Date.parse(p.issued_at) - now) > ReadSkewMs) return refuse(`Authorization: payload.issued_at must be within ${ReadSkewMs / 1000} s of the gateway's clock`)
  if (!nonces.firstUse(p.principal, p.nonce, now)) return refuse("Authorization: this signed read was used before (replayed nonce); sign each request afresh")
  return Either.right(envelope.right)
})
