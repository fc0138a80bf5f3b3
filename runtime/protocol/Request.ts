import { Effect, Either, type Schema } from "effect"
import { PolicyStore } from "../policy/PolicyStore.js"
import type { ActivePolicy } from "../policy/ActivePolicy.js"
import type { Envelope } from "../schema/Envelope.js"
import { authenticate } from "./Authenticate.js"
import { checkSize, decodeEnvelope, parseBody } from "./Decode.js"
import { decodeWith } from "../schema/DecodeWith.js"
import { invalidRequest, unavailable, type Reply } from "./Replies.js"
import { checkOffThread, InlineBytes } from "./internal/EnvelopeChecker.js"

/** A request that reached a handler: its signed envelope, decoded payload and the policy it was checked under. */
export interface Signed<P> {
  readonly envelope: Envelope
  readonly payload: P
  readonly policy: ActivePolicy
}

/** Fails with the reply a rejected request gets; nothing has been written yet. */
export class Rejected {
  readonly _tag = "Rejected"
  constructor(readonly reply: Reply) {}
}

const orReject = <A>(e: Either.Either<A, Reply>) => (Either.isRight(e) ? Effect.succeed(e.right) : Effect.fail(new Rejected(e.left)))

/**
 * Cost before trust: size, then the envelope's shape, then authentication (op, principal, key
 * registration, signature), and only then the payload's schema. A body larger than
 * `InlineBytes` is parsed and its signature verified on a worker (internal/EnvelopeChecker.ts);
 * the event loop parses it again only once it is authenticated.
 */
export const signedRequest = <A, I>(data: Uint8Array, op: string, schema: Schema.Schema<A, I>) =>
  Effect.gen(function* () {
    yield* orReject(checkSize(data))
    const policy = yield* (yield* PolicyStore).current
    let envelope: Envelope
    if (data.length <= InlineBytes) {
      envelope = yield* orReject(Either.flatMap(parseBody(data), decodeEnvelope))
      yield* orReject(authenticate(envelope, op, policy))
    } else {
      const verdict = yield* Effect.tryPromise({ try: () => checkOffThread(data), catch: (e) => new Rejected(unavailable(e instanceof Error ? e.message : String(e))) })
      if ("invalid" in verdict) return yield* Effect.fail(new Rejected(invalidRequest(verdict.invalid, "")))
      const head = yield* orReject(decodeEnvelope(verdict.head))
      yield* orReject(authenticate(head, op, policy, () => verdict.valid))
      envelope = yield* orReject(Either.flatMap(parseBody(data), decodeEnvelope))
    }
    const payload = yield* orReject(decodeWith(schema, envelope.payload, "payload"))
    return { envelope, payload, policy } satisfies Signed<A>
  })

/** An unsigned request (reads): parse and decode only. */
export const plainRequest = <A, I>(data: Uint8Array, schema: Schema.Schema<A, I>) =>
  Effect.flatMap(orReject(parseBody(data)), (body) => orReject(decodeWith(schema, body)))
