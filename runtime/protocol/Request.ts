import { Effect, Either, type Schema } from "effect"
import { PolicyStore } from "../policy/PolicyStore.js"
import type { ActivePolicy } from "../policy/ActivePolicy.js"
import type { Envelope } from "../schema/Envelope.js"
import { authenticate } from "./Authenticate.js"
import { decodeEnvelope, decodeWith, parseBody } from "./Decode.js"
import type { Reply } from "./Replies.js"

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

/** parse -> envelope -> authenticate (key, signature, op) -> payload schema, in that order. */
export const signedRequest = <A, I>(data: Uint8Array, op: string, schema: Schema.Schema<A, I>) =>
  Effect.gen(function* () {
    const body = yield* orReject(parseBody(data))
    const envelope = yield* orReject(decodeEnvelope(body))
    const policy = yield* (yield* PolicyStore).current
    yield* orReject(authenticate(envelope, op, policy))
    const payload = yield* orReject(decodeWith(schema, envelope.payload, "payload"))
    return { envelope, payload, policy } satisfies Signed<A>
  })

/** An unsigned request (reads): parse and decode only. */
export const plainRequest = <A, I>(data: Uint8Array, schema: Schema.Schema<A, I>) =>
  Effect.flatMap(orReject(parseBody(data)), (body) => orReject(decodeWith(schema, body)))
