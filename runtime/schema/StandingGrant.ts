import { Schema } from "effect"
import { Principal, Timestamp, ToolName } from "./Ids.js"
import { Envelope } from "./Envelope.js"
import { JsonValue } from "./Json.js"

/** The longest a standing approval may stand: a grant is bounded in time as well as in uses. */
export const MaxStandingMs = 30 * 24 * 3_600_000
/** The most calls one standing approval may approve. */
export const MaxStandingUses = 1_000

/** A grant's id: chosen by the witness, unique in the kernel (the first record of its subject wins). */
export const GrantId = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]{1,64}$/, { message: () => "a grant_id is 1-64 letters, digits, '_' or '-'" }))

/**
 * A bound on one argument of the call: equal to a value, one of a list (values compared as
 * canonical JSON, so an object or array is bounded whole), a number at most or at least a bound,
 * or `any: true`, which leaves the argument free and says so. Every bound given must hold. A call
 * argument the scope does not name puts the call outside the scope: a grant bounds every
 * argument, or names the ones it leaves free.
 */
export const ArgBound = Schema.Struct({
  eq: Schema.optional(JsonValue),
  in: Schema.optional(Schema.Array(JsonValue).pipe(Schema.minItems(1), Schema.maxItems(100))),
  max: Schema.optional(Schema.Number),
  min: Schema.optional(Schema.Number),
  any: Schema.optional(Schema.Literal(true))
})
export type ArgBound = typeof ArgBound.Type

/**
 * Why `name` cannot name an argument in a scope (null: it can): any name a call may carry, 1-256
 * characters without control characters. Checked when a grant is judged, not by the record's
 * key schema, which would drop such a key silently instead of refusing the grant.
 */
export const argNameProblem = (name: string): string | null =>
  // eslint-disable-next-line no-control-regex
  name.length === 0 || name.length > 256 ? "is not 1-256 characters" : /[\u0000-\u001f\u007f]/.test(name) ? "has a control character" : null

/**
 * The calls a standing approval covers: proposed by one of `principals`, of `tool`, with every
 * argument inside its bound in `args` (and no argument `args` does not name).
 */
export const StandingScope = Schema.Struct({
  principals: Schema.Array(Principal).pipe(Schema.minItems(1), Schema.maxItems(100)),
  tool: ToolName,
  args: Schema.optional(Schema.Record({ key: Schema.String, value: ArgBound }))
})
export type StandingScope = typeof StandingScope.Type

/**
 * `wk.v1.standing.grant`: a witness's signed approval of future calls inside a scope, in advance
 * ("`money_transfer` to bob up to 5,000 for `agent:alice`, for two hours, at most 10 calls").
 * The kernel applies it to a matching call when the call is held, as this witness's approval
 * under `class`, once per call and at most `max_uses` times; it never turns a DENY or a veto
 * into a release, and the witness may revoke it.
 */
export const StandingGrantPayload = Schema.Struct({
  op: Schema.Literal("standing.grant"),
  principal: Principal,
  class: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
  grant_id: GrantId,
  scope: StandingScope,
  max_uses: Schema.Int.pipe(Schema.between(1, MaxStandingUses)),
  not_before: Schema.optional(Timestamp),
  issued_at: Timestamp,
  expires_at: Timestamp,
  reason: Schema.optional(Schema.String.pipe(Schema.maxLength(1_000))),
  nonce: Schema.String.pipe(Schema.minLength(8), Schema.maxLength(128))
})
export type StandingGrantPayload = typeof StandingGrantPayload.Type

/** `wk.v1.standing.revoke`: the grant's witness (or an admin) ends a standing approval; calls it approved stay approved. */
export const StandingRevokePayload = Schema.Struct({
  op: Schema.Literal("standing.revoke"),
  principal: Principal,
  grant_id: GrantId,
  reason: Schema.optional(Schema.String.pipe(Schema.maxLength(1_000))),
  issued_at: Timestamp,
  nonce: Schema.String.pipe(Schema.minLength(8), Schema.maxLength(128))
})
export type StandingRevokePayload = typeof StandingRevokePayload.Type

/** One use: the call (and generation) the grant approved. */
export const StandingUse = Schema.Struct({
  held_id: Schema.String,
  generation: Schema.Int,
  call_digest: Schema.String,
  at: Timestamp
})
export type StandingUse = typeof StandingUse.Type

/**
 * A grant's state as its subject (`wk.v1.events._standing.<grant_id>`) records it, each record
 * whole: the signed grant, every use so far in order, and the signed revocation once there is
 * one. Each record replaces the last with a compare-and-set on the subject's last sequence, so
 * concurrent kernels never give one grant more than `max_uses` uses, and the subject is the
 * grant's audit trail.
 */
export const StandingRecord = Schema.Struct({
  type: Schema.Literal("standing.granted", "standing.used", "standing.revoked"),
  grant_id: GrantId,
  grant_digest: Schema.String,
  grant: Envelope,
  uses: Schema.Array(StandingUse),
  revocation: Schema.optional(Envelope),
  at: Timestamp
})
export type StandingRecord = typeof StandingRecord.Type

/** The records' subject token under `wk.v1.events.`. */
export const standingSubjectOf = (grantId: string): string => `_standing.${grantId}`

export const decodeStandingRecord = Schema.decodeUnknownEither(Schema.parseJson(StandingRecord))
