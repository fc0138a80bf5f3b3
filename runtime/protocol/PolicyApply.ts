import { Effect } from "effect"
import { HeldCalls } from "../loops/HeldCalls.js"
import { PolicyStore } from "../policy/PolicyStore.js"
import { classifyChange, policyCall, PolicyApplyTool } from "../policy/PolicyChange.js"
import { MaxProposeTtlMs, PolicyApplyPayload } from "../schema/Requests.js"
import { jcsDigest } from "../schema/Canonical.js"
import { forbidden, invalidRequest, proposeReply, unavailable, type Reply } from "./Replies.js"
import { signedRequest, type Signed } from "./Request.js"
import { proposal } from "./Propose.js"
import { staleEnvelope } from "./internal/replayGuard.js"
import { effectivePreferences } from "../policy/Preferences.js"
import { HeldIds } from "./HeldIds.js"
import type { ProposeCall } from "../schema/Requests.js"

/**
 * `wk.v1.admin.policy.apply`: replaces the profile of the same name (or adds it), bumps the
 * policy epoch and answers once the epoch is recorded. The open held calls are re-evaluated under
 * the new policy in the background, paced and sharded across kernels
 * (runtime/loops/PolicyReevaluation.ts); none can be dispatched on evidence checked under an
 * older epoch meanwhile (Reconciler: `mayDispatch`).
 * An expired envelope is refused; one whose nonce this admin already applied (or, without a
 * nonce, whose signed payload was already applied) is a duplicate (`duplicate: true` and the
 * epoch that apply made), so a captured envelope never reverts a later change. A widening's envelope sent again is the same held call.
 */
export const policyApply = (data: Uint8Array) =>
  Effect.gen(function* () {
    const { payload: p, policy, envelope } = yield* signedRequest(data, "policy.apply", PolicyApplyPayload)
    const stale = staleEnvelope(p.expires_at, Date.now())
    if (stale !== undefined) return stale
    if (!policy.admins.has(p.principal)) return forbidden(`principal '${p.principal}' is not a policy admin`)
    const store = yield* PolicyStore
    const change = classifyChange(policy, p.profile, "payload.profile")
    if (change._tag === "Invalid") return invalidRequest(change.message, change.field)
    // A widening is itself a governed call that another admin must witness.
    if (change._tag === "Widening") return yield* heldChange({ envelope, policy, payload: { op: "propose", principal: p.principal, ...policyCall(p), tool: PolicyApplyTool, args: { profile: p.profile } } })
    // Without a nonce (a client written before nonces), the signed payload itself is the nonce,
    // kept for as long as the envelope could be valid: without an expiry, for good. The same
    // profile applied again without a nonce is then a duplicate too; clients that send nonces
    // (wk, the client library) can apply any profile again.
    const nonce = p.nonce ?? `payload-sha256:${jcsDigest(p)}`
    const expiresAt = p.expires_at ?? (p.nonce === undefined ? NeverExpires : new Date(Date.now() + MaxProposeTtlMs).toISOString())
    const applied = yield* store.applyOnce(change.profiles, { principal: p.principal, nonce, expires_at: expiresAt }, { envelope })
    if (applied.duplicate !== undefined) return { status: 200, duplicate: true, policy_epoch: applied.duplicate } satisfies Reply
    return { status: 200, policy_epoch: applied.policy.epoch } satisfies Reply
  })

/**
 * A widening becomes the held call of `kernel_policy_apply`, recorded with the admin's signed
 * `policy.apply` request as its proposal; it answers like a proposal (202 while it waits).
 */
/** How long a nonce-less, expiry-less envelope's payload is remembered: for good. */
const NeverExpires = "9999-12-31T23:59:59.999Z"

const heldChange = (req: Signed<ProposeCall>) =>
  Effect.gen(function* () {
    const p = req.payload
    const { heldId, salt } = (yield* HeldIds).of(p)
    const handled = yield* (yield* HeldCalls).handle(heldId, proposal(req, salt, effectivePreferences(req.policy, p.principal, undefined)), { policy: req.policy, follow: "await" })
    if (handled.drive === null) return handled.reply
    return (handled.driven?.facts == null ? null : proposeReply(handled.driven.facts)) ?? unavailable(`policy change ${heldId} was recorded but not yet decided; read it with held.get`)
  })
