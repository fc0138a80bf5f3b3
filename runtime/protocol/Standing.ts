import { Effect, Either } from "effect"
import { judgeStandingGrant } from "../heldcall/Standing.js"
import { SkewMs } from "../heldcall/decide/Decision.js"
import { StandingGrants, type StoredGrant } from "../ledger/StandingGrants.js"
import { PolicyStore } from "../policy/PolicyStore.js"
import { registryOf } from "../policy/ActivePolicy.js"
import { jcsDigest } from "../schema/Canonical.js"
import { ReaderRequest } from "../schema/Requests.js"
import { StandingGrantPayload, StandingRevokePayload } from "../schema/StandingGrant.js"
import { conflict, forbidden, unavailable, type Reply } from "./Replies.js"
import { readerFor } from "./ReadProof.js"
import { plainRequest, signedRequest } from "./Request.js"

/** Attempts at a grant's compare-and-set when kernels write it at once. */
const MaxAttempts = 8

const noSuchGrant = (grantId: string): Reply => ({ status: 404, error: { code: "not_found", message: `no standing approval ${grantId}` } })

/** What a reader is shown of a grant: its terms, its uses so far and its revocation. */
export const grantView = (g: StoredGrant) => ({
  grant_id: g.record.grant_id,
  grant_digest: g.record.grant_digest,
  principal: g.payload.principal,
  class: g.payload.class,
  scope: g.payload.scope,
  max_uses: g.payload.max_uses,
  uses: g.record.uses,
  ...(g.payload.not_before !== undefined ? { not_before: g.payload.not_before } : {}),
  expires_at: g.payload.expires_at,
  ...(g.payload.reason !== undefined ? { reason: g.payload.reason } : {}),
  ...(g.record.revocation !== undefined ? { revoked_at: g.record.at, revoked_by: String(g.record.revocation.payload["principal"]) } : {})
})

/**
 * `wk.v1.standing.grant`: records a witness's signed standing approval (schema/StandingGrant.ts)
 * once judged (heldcall/Standing.ts `judgeStandingGrant`): 201 recorded; the same signed grant
 * again 200 duplicate; another grant under a taken id 409; a grant that may not stand 422.
 */
export const standingGrant = (data: Uint8Array) =>
  Effect.gen(function* () {
    const { payload, envelope, policy } = yield* signedRequest(data, "standing.grant", StandingGrantPayload)
    const refused = judgeStandingGrant(payload, registryOf(policy), Date.now())
    if (refused !== null) return { status: 422, disposition: "invalid", reason: refused } satisfies Reply as Reply
    const grants = yield* StandingGrants
    const digest = jcsDigest(payload)
    const recorded = (g: StoredGrant): Reply =>
      g.record.grant_digest === digest ? { status: 200, disposition: "duplicate", ...grantView(g) } : conflict("grant_id_taken", `grant_id ${payload.grant_id} is another grant's`)
    const existing = yield* grants.get(payload.grant_id)
    if (existing !== null) return recorded(existing)
    const stored = yield* grants.put({ type: "standing.granted", grant_id: payload.grant_id, grant_digest: digest, grant: envelope, uses: [], at: new Date().toISOString() }, 0)
    if (stored !== null) return { status: 201, disposition: "recorded", ...grantView(stored) } satisfies Reply as Reply
    const raced = yield* grants.get(payload.grant_id)
    return raced === null ? unavailable("the standing approval was neither stored nor found") : recorded(raced)
  })

/**
 * `wk.v1.standing.revoke`: the grant's witness (or an admin) ends it. No later hold takes a
 * use; calls it already approved keep that approval (the witness revokes one with a `revoke`
 * attestation on the call). Revoking a revoked grant is 200 duplicate.
 */
export const standingRevoke = (data: Uint8Array) =>
  Effect.gen(function* () {
    const { payload, envelope, policy } = yield* signedRequest(data, "standing.revoke", StandingRevokePayload)
    if (Date.parse(payload.issued_at) > Date.now() + SkewMs) return { status: 422, disposition: "invalid", reason: `issued_at ${payload.issued_at} is more than ${SkewMs / 1000} s in the future (the allowed clock skew)` } satisfies Reply as Reply
    const grants = yield* StandingGrants
    for (let attempt = 0; attempt < MaxAttempts; attempt++) {
      const g = yield* grants.get(payload.grant_id)
      if (g === null) return noSuchGrant(payload.grant_id)
      if (g.payload.principal !== payload.principal && !policy.admins.has(payload.principal)) return forbidden(`only ${g.payload.principal} or an admin may revoke standing approval ${payload.grant_id}`)
      if (g.record.revocation !== undefined) return { status: 200, disposition: "duplicate", ...grantView(g) } satisfies Reply as Reply
      const stored = yield* grants.put({ ...g.record, type: "standing.revoked", revocation: envelope, at: new Date().toISOString() }, g.seq)
      if (stored !== null) return { status: 200, disposition: "revoked", ...grantView(stored) } satisfies Reply as Reply
    }
    return unavailable(`standing approval ${payload.grant_id} kept changing; try again`)
  })

/**
 * `wk.v1.standing.list`: the standing approvals the signed reader (a read bound to
 * `standing.list`, its nonce good once) gave or is covered by (an admin reads them all), newest
 * expiry first, each read fresh.
 */
export const standingList = (data: Uint8Array) =>
  Effect.gen(function* () {
    const req = yield* plainRequest(data, ReaderRequest)
    const proved = yield* readerFor(req.reader, { operation: "standing.list" })
    if (Either.isLeft(proved)) return proved.left
    const policy = yield* (yield* PolicyStore).current
    const reader = proved.right.principal
    const grants = yield* StandingGrants
    const mine = grants.known().filter((g) => policy.admins.has(reader) || g.payload.principal === reader || g.payload.scope.principals.includes(reader))
    const fresh = yield* Effect.forEach(mine, (g) => grants.get(g.record.grant_id), { concurrency: 8 })
    const listed = fresh.filter((g): g is StoredGrant => g !== null).sort((a, b) => Date.parse(b.payload.expires_at) - Date.parse(a.payload.expires_at))
    return { status: 200, principal: reader, grants: listed.map(grantView) } satisfies Reply as Reply
  })
