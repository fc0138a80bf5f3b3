import { Effect, Layer, Ref } from "effect"
import type { Profile } from "../schema/Profile.js"
import { activePolicy } from "./ActivePolicy.js"
import { PolicyStore } from "./PolicyStore.js"

/**
 * The policy store in memory, for tests of the loops: epoch 1 holds `profiles`; each apply
 * makes the next epoch; an envelope's nonce applies once.
 */
export const makeMemoryPolicyStore = (profiles: ReadonlyArray<Profile>) =>
  Effect.gen(function* () {
    const ref = yield* Ref.make(activePolicy(1, profiles))
    const applied = new Map<string, number>()
    const apply = (next: ReadonlyArray<Profile>) => Ref.updateAndGet(ref, (cur) => activePolicy(cur.epoch + 1, next))
    return PolicyStore.of({
      current: Ref.get(ref),
      refresh: Ref.get(ref),
      apply,
      applyOnce: (next, envelope) =>
        Effect.gen(function* () {
          const key = `${envelope.principal}\u0000${envelope.nonce}`
          const seen = applied.get(key)
          if (seen !== undefined) return { policy: yield* Ref.get(ref), duplicate: seen }
          const policy = yield* apply(next)
          applied.set(key, policy.epoch)
          return { policy }
        })
    })
  })

export const layerMemoryPolicyStore = (profiles: ReadonlyArray<Profile>) => Layer.effect(PolicyStore, makeMemoryPolicyStore(profiles))
