import { Effect, Either } from "effect"
import { Continuations } from "../ledger/ContinuationStore.js"
import { checkContinuation } from "../schema/Continuation.js"
import { parseBody } from "./Decode.js"
import { invalidRequest, unavailable, type Reply } from "./Replies.js"

const Marker = Buffer.from('"continuation":')

/**
 * Keeps the continuation a propose request carries beside its envelope, before the call is
 * recorded: checked against the signed `continuation_digest` and the size bound
 * (schema/Continuation.ts), then stored by digest. Answers the refusal (400 naming
 * `continuation`, or 503 when the store cannot be written), or undefined to go on.
 */
export const keepRequestContinuation = (data: Uint8Array, digest: string | undefined) =>
  Effect.gen(function* () {
    // Most proposals carry none: the body is parsed again only when it may.
    if (digest === undefined && Buffer.from(data.buffer, data.byteOffset, data.byteLength).indexOf(Marker) < 0) return undefined
    const body = parseBody(data)
    if (Either.isLeft(body)) return body.left
    const checked = checkContinuation(digest, body.right)
    if (Either.isLeft(checked)) return invalidRequest(checked.left.message, checked.left.path) as Reply
    if (checked.right === undefined) return undefined
    return yield* (yield* Continuations).keep(checked.right).pipe(
      Effect.as(undefined),
      Effect.catchAll((e) => Effect.succeed(unavailable(`the continuation could not be kept: ${e.message}`) as Reply))
    )
  })
