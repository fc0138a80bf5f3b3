import { Effect, Either } from "effect"
import { HeldCallStore } from "../ledger/HeldCallStore.js"
import { Nats } from "../ledger/Nats.js"
import { Driver } from "../loops/Driver.js"
import { wake } from "../ledger/Wakes.js"
import { eventOf } from "../loops/Actions.js"
import { PolicyStore } from "../policy/PolicyStore.js"
import { checkLayers } from "../policy/Layers.js"
import type { PolicyEpochChanged } from "../schema/Events.js"
import { Profile } from "../schema/Profile.js"
import { PolicyApplyPayload } from "../schema/Requests.js"
import { Buckets } from "../schema/Subjects.js"
import { decodeWith } from "./Decode.js"
import { forbidden, invalidRequest, type Reply } from "./Replies.js"
import { Rejected, signedRequest } from "./Request.js"

/**
 * `wk.v1.admin.policy.apply`: replaces the profile of the same name (or adds it), bumps the
 * policy epoch, and tells every open held call, so evidence is re-evaluated under the new policy.
 */
export const policyApply = (data: Uint8Array) =>
  Effect.gen(function* () {
    const { payload: p, policy } = yield* signedRequest(data, "policy.apply", PolicyApplyPayload)
    if (!policy.admins.has(p.principal)) return forbidden(`principal '${p.principal}' is not a policy admin`)
    const decoded = decodeWith(Profile, p.profile, "payload.profile")
    if (Either.isLeft(decoded)) return yield* Effect.fail(new Rejected(decoded.left))
    const profile = decoded.right
    const profiles = [...policy.profiles.filter((x) => x.name !== profile.name), profile]
    const widening = checkLayers(profiles)[0]
    if (widening !== undefined) return invalidRequest(widening.message, `payload.profile.${widening.field}`)
    const next = yield* (yield* PolicyStore).apply(profiles)
    yield* announceEpoch(next.epoch)
    return { status: 200, policy_epoch: next.epoch } satisfies Reply
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
