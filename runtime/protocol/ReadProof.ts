import { Either } from "effect"
import type { ActivePolicy } from "../policy/ActivePolicy.js"
import type { Reader } from "../heldcall/Views.js"
import type { Envelope } from "../schema/Envelope.js"
import { ReadPayload } from "../schema/Requests.js"
import { authenticate } from "./Authenticate.js"
import { decodeWith } from "./Decode.js"
import { unauthenticated, type Reply } from "./Replies.js"

/** How far a signed read's `issued_at` may be from the kernel's clock, either way. */
export const ReadProofWindowMs = 5 * 60_000

/**
 * The reader a signed read proves: the envelope is authenticated like every signed request
 * (`op: "read"`, key registered to the principal, signature over the JCS of the payload) and
 * is recent. The reader's classes and admin standing come from the policy in force.
 */
export const readerOf = (env: Envelope, policy: ActivePolicy, nowMs: number): Either.Either<Reader, Reply> =>
  Either.gen(function* () {
    yield* authenticate(env, "read", policy)
    const p = yield* decodeWith(ReadPayload, env.payload, "reader.payload")
    if (Math.abs(Date.parse(p.issued_at) - nowMs) > ReadProofWindowMs) return yield* Either.left(unauthenticated(`reader.payload.issued_at must be within ${ReadProofWindowMs / 1000} s of the kernel's clock`))
    return { principal: p.principal, classes: policy.principals.get(p.principal)?.classes ?? [], admin: policy.admins.has(p.principal) }
  })
