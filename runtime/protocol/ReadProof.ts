import { Effect, Either } from "effect"
import type { ActivePolicy } from "../policy/ActivePolicy.js"
import { PolicyStore } from "../policy/PolicyStore.js"
import type { Reader } from "../heldcall/Views.js"
import { ReadNonces } from "../ledger/ReadNonces.js"
import type { Envelope } from "../schema/Envelope.js"
import { ReadPayload } from "../schema/Requests.js"
import { Subjects } from "../schema/Subjects.js"
import { authenticate } from "./Authenticate.js"
import { decodeWith } from "../schema/DecodeWith.js"
import { unauthenticated, type Reply } from "./Replies.js"

/** How far a signed read's `issued_at` may be from the kernel's clock, either way. */
export const ReadProofWindowMs = 5 * 60_000

/** A kernel read a signed read may be for. */
export type ReadOperation = "held.get" | "held.list" | "standing.list" | "grants.get" | "health"

/** What a signed read is for: its operation, and for `held.get` the call. */
export interface ReadTarget {
  readonly operation: ReadOperation
  readonly held_id?: string
}

/** The NATS subject that names each operation in a read signed for NATS (`payload.path`). */
export const ReadSubjects: Record<ReadOperation, string> = {
  "held.get": Subjects.get,
  "held.list": Subjects.heldList,
  "standing.list": Subjects.standingList,
  "grants.get": Subjects.grants,
  health: Subjects.health
}

const heldPath = /^\/held\/(h_[0-9a-f]{32})(\/events)?$/

/**
 * The kernel read a read's payload names, or why it names none. Over HTTP (`method` given) the
 * gateway's `GET` path names it: `/held` the list, `/held/<id>` and `/held/<id>/events` that
 * call, `/standing` the grants, `/kernels` the health. Over NATS, `path` is the subject and
 * `held.get` names its call in `held_id`.
 */
export const namedTarget = (p: ReadPayload): Either.Either<ReadTarget, string> => {
  if (p.method !== undefined) {
    if (p.method !== "GET" || p.path === undefined) return Either.left(`reader.payload names ${p.method} ${p.path ?? "(no path)"}, which is no read`)
    const path = p.path.split("?")[0]!
    const held = heldPath.exec(path)
    if (held !== null) return Either.right({ operation: "held.get", held_id: held[1]! })
    const byPath: Record<string, ReadOperation> = { "/held": "held.list", "/standing": "standing.list", "/kernels": "health" }
    const operation = byPath[path]
    return operation === undefined ? Either.left(`reader.payload.path ${path} names no kernel read`) : Either.right({ operation })
  }
  const operation = (Object.keys(ReadSubjects) as Array<ReadOperation>).find((op) => ReadSubjects[op] === p.path)
  if (operation === undefined) return Either.left("a signed read names its operation: reader.payload.path is the NATS subject read (or, with method, the HTTP path)")
  if (operation !== "held.get") return Either.right({ operation })
  return p.held_id === undefined ? Either.left("a signed held.get names its call: reader.payload.held_id") : Either.right({ operation, held_id: p.held_id })
}

const sameTarget = (a: ReadTarget, b: ReadTarget) => a.operation === b.operation && a.held_id === b.held_id

/**
 * The reader a signed read proves for `target`, checked cheapest first: the payload decodes, is
 * recent, and names exactly this operation and call; then it is authenticated like every signed
 * request (`op: "read"`, a key registered to the principal, and only then the signature over the
 * JCS of the payload). The reader's classes and admin standing come from the policy in force.
 * Its nonce is not checked here (`readerFor` does, once authenticated).
 */
export const readerOf = (env: Envelope, policy: ActivePolicy, nowMs: number, target: ReadTarget): Either.Either<{ readonly reader: Reader; readonly nonce: string }, Reply> =>
  Either.gen(function* () {
    const p = yield* decodeWith(ReadPayload, env.payload, "reader.payload")
    if (Math.abs(Date.parse(p.issued_at) - nowMs) > ReadProofWindowMs) return yield* Either.left(unauthenticated(`reader.payload.issued_at must be within ${ReadProofWindowMs / 1000} s of the kernel's clock`))
    const named = namedTarget(p)
    if (Either.isLeft(named)) return yield* Either.left(unauthenticated(named.left))
    if (!sameTarget(named.right, target)) {
      const what = (t: ReadTarget) => t.operation + (t.held_id !== undefined ? ` of ${t.held_id}` : "")
      return yield* Either.left(unauthenticated(`this signed read is for ${what(named.right)}, not ${what(target)}`))
    }
    yield* authenticate(env, "read", policy)
    return { reader: { principal: p.principal, classes: policy.principals.get(p.principal)?.classes ?? [], admin: policy.admins.has(p.principal) }, nonce: p.nonce }
  })

/**
 * The reader of a signed read for `target` under the policy in force, its nonce accepted once
 * (ledger/ReadNonces.ts: shared by every kernel, so a read used at one gateway or kernel is
 * refused at any other). `onceFor` narrows "once" where every kernel answers the same read
 * (health: once per kernel). A refusal is the reply to send (401).
 */
export const readerFor = (env: Envelope, target: ReadTarget, onceFor: ReadonlyArray<string> = []) =>
  Effect.gen(function* () {
    const policy = yield* (yield* PolicyStore).current
    const proved = readerOf(env, policy, Date.now(), target)
    if (Either.isLeft(proved)) return Either.left(proved.left) as Either.Either<Reader, Reply>
    const { reader, nonce } = proved.right
    const first = yield* (yield* ReadNonces).firstUse(["read", reader.principal, nonce, ...onceFor])
    return first ? Either.right(reader) : Either.left(unauthenticated("reader.payload.nonce was used before: a signed read is good once; sign each read afresh"))
  })
