import { Effect } from "effect"
import { HeldCallStore } from "../ledger/HeldCallStore.js"
import { Nats } from "../ledger/Nats.js"
import { Driver } from "../loops/Driver.js"
import { wake } from "../ledger/Wakes.js"
import { eventOf } from "../loops/Actions.js"
import { PolicyStore } from "../policy/PolicyStore.js"
import { classifyChange, policyCall, PolicyApplyTool } from "../policy/PolicyChange.js"
import type { PolicyEpochChanged } from "../schema/Events.js"
import { MaxProposeTtlMs, PolicyApplyPayload } from "../schema/Requests.js"
import { Buckets } from "../schema/Subjects.js"
import { forbidden, invalidRequest, proposeReply, unavailable, type Reply } from "./Replies.js"
import { signedRequest, type Signed } from "./Request.js"
import { record } from "./Propose.js"
import { staleEnvelope } from "./internal/replayGuard.js"
import { effectivePreferences } from "../policy/Preferences.js"
import { HeldIds } from "./HeldIds.js"
import type { ProposeCall } from "../schema/Requests.js"

/**
 * `wk.v1.admin.policy.apply`: replaces the profile of the same name (or adds it), bumps the
 * policy epoch, and tells every open held call, so evidence is re-evaluated under the new policy.
 * An expired envelope is refused; one whose nonce this admin already applied is a duplicate
 * (`duplicate: true` and the epoch that apply made), so a captured envelope never reverts a
 * later change. A widening's envelope sent again is the same held call.
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
    if (change._tag === "Widening") return yield* heldChange({ envelope, policy, payload: { op: "propose", principal: p.principal, ...policyCall(p.profile), tool: PolicyApplyTool, args: { profile: p.profile } } })
    if (p.nonce === undefined) {
      const next = yield* store.apply(change.profiles, { envelope })
      yield* announceEpoch(next.epoch)
      return { status: 200, policy_epoch: next.epoch } satisfies Reply
    }
    const expiresAt = p.expires_at ?? new Date(Date.now() + MaxProposeTtlMs).toISOString()
    const applied = yield* store.applyOnce(change.profiles, { principal: p.principal, nonce: p.nonce, expires_at: expiresAt }, { envelope })
    if (applied.duplicate !== undefined) return { status: 200, duplicate: true, policy_epoch: applied.duplicate } satisfies Reply
    yield* announceEpoch(applied.policy.epoch)
    return { status: 200, policy_epoch: applied.policy.epoch } satisfies Reply
  })

/**
 * A widening becomes the held call of `kernel_policy_apply`, recorded with the admin's signed
 * `policy.apply` request as its proposal; it answers like a proposal (202 while it waits).
 */
const heldChange = (req: Signed<ProposeCall>) =>
  Effect.gen(function* () {
    const p = req.payload
    const heldId = (yield* HeldIds).of(p).heldId
    const recorded = yield* record(heldId, req, effectivePreferences(req.policy, p.principal, undefined))
    if (recorded !== "ok") return recorded
    const driven = yield* (yield* Driver).drive(heldId, "cached")
    return (driven.facts === null ? null : proposeReply(driven.facts)) ?? unavailable(`policy change ${heldId} was recorded but not yet decided; read it with held.get`)
  })

/** Appends `policy.epoch_changed` to every open held call and drives each one. */
export const announceEpoch = (epoch: number) =>
  Effect.gen(function* () {
    const { kv } = yield* Nats
    const store = yield* HeldCallStore
    const driver = yield* Driver
    const open = yield* Effect.promise(async () => {
      const bucket = await kv(Buckets.open)
      const keys: Array<string> = []
      for await (const k of await bucket.keys()) keys.push(k)
      return keys
    })
    yield* Effect.forEach(
      open,
      (heldId) =>
        store
          .serialized(
            heldId,
            Effect.gen(function* () {
              for (let attempt = 0; attempt < 16; attempt++) {
                const loaded = yield* store.load(heldId, "cached")
                if (loaded === null || loaded.facts.lifecycle !== "open" || loaded.facts.policy_epoch >= epoch) return
                const event = eventOf<typeof PolicyEpochChanged.Type>({
                  held_id: heldId,
                  generation: loaded.facts.generation,
                  type: "policy.epoch_changed",
                  event_id: `policy.epoch_changed:${heldId}:e${epoch}`,
                  policy_epoch: epoch
                })
                const r = yield* store.append(loaded, [event]).pipe(Effect.either)
                if (r._tag === "Right" || r.left._tag !== "AppendConflict") return
              }
            })
          )
          .pipe(Effect.zipRight(wake(heldId)), Effect.zipRight(Effect.forkDaemon(driver.drive(heldId).pipe(Effect.ignore))), Effect.ignore),
      { concurrency: 16, discard: true }
    )
  })
