import { Context, Effect, Layer } from "effect"
import { HeldCallStore, type Freshness, type Loaded } from "../ledger/HeldCallStore.js"
import type { AppendConflict, LedgerError } from "../ledger/LedgerError.js"
import type { LedgerPorts } from "../ledger/LedgerPorts.js"
import { OpenIndex } from "../ledger/OpenIndex.js"
import { PolicyStore } from "../policy/PolicyStore.js"
import { Adjudicator } from "../policy/Adjudicator.js"
import { Admission } from "../policy/Admission.js"
import { classesOf, type ActivePolicy } from "../policy/ActivePolicy.js"
import { KernelConfig } from "../KernelConfig.js"
import { reconcile, type Action, type ReconcileContext } from "../heldcall/Reconciler.js"
import type { HeldCallFacts } from "../schema/Facts.js"
import { quiescent } from "../heldcall/Facts.js"
import { execute, resolve } from "../executor/Executor.js"
import { adjudicate } from "./Adjudicate.js"
import { admit } from "./Admit.js"
import { deliver } from "./Deliver.js"
import { report } from "./Report.js"
import { progress, type ActionResult } from "./Actions.js"

/** Where one drive left a held call: its facts, and when to look again (null: only on a new event). */
export interface Driven {
  readonly facts: HeldCallFacts | null
  readonly requeueMs: number | null
}

/** Most plan/act rounds one drive makes before it yields (the call is requeued, never spun). */
const MaxRounds = 32

/**
 * Drives one held call toward its desired state: read facts, reconcile, append the local
 * facts, perform one enabled action, repeat until nothing is enabled. Level-based: it never
 * asks which event woke it. Several processes may drive the same call; leases and
 * expected-sequence appends make that safe.
 */
export class Driver extends Context.Tag("wk/Driver")<
  Driver,
  {
    /** `freshness` applies to the first read; later rounds read this process's own appends. */
    readonly drive: (heldId: string, freshness?: Freshness) => Effect.Effect<Driven, LedgerError>
  }
>() {}

export const makeDriver = Effect.gen(function* () {
  const context = yield* Effect.context<LedgerPorts | PolicyStore | Adjudicator | Admission | KernelConfig>()
  const store = Context.get(context, HeldCallStore)
  const policies = Context.get(context, PolicyStore)
  const openIndex = Context.get(context, OpenIndex)
  const { delivery } = Context.get(context, KernelConfig)

  const contextFor = (policy: ActivePolicy): ReconcileContext => ({
    now: Date.now(),
    policyEpoch: policy.epoch,
    classesOf: (p) => classesOf(policy, p),
    keysOf: (p) => policy.principals.get(p)?.keys ?? [],
    principals: () => [...policy.principals.keys()],
    delivery
  })

  type Deps = LedgerPorts | PolicyStore | Adjudicator | Admission | KernelConfig
  const perform = (action: Action, loaded: Loaded, policy: ActivePolicy): Effect.Effect<ActionResult, LedgerError | AppendConflict, Deps> => {
    const heldId = loaded.facts.held_id
    switch (action.kind) {
      case "adjudicate":
        return adjudicate(loaded, policy)
      case "execute":
        return execute(loaded, () => contextFor(policy))
      case "resolve":
        return resolve(heldId)
      case "admit":
        return admit(loaded, policy)
      case "deliver":
        return deliver(loaded)
      case "report":
        return report(loaded, drive)
    }
  }

  /** Keeps the index of open held calls (what a policy change must revisit) in step. */
  const index = (before: HeldCallFacts, after: HeldCallFacts) => {
    const parks = !before.held && after.held && after.outcome === null
    // An ended call stays indexed while its delivery is owed, so the recovery sweep revisits it.
    const ends = after.held && quiescent(after) && !quiescent(before)
    // Most transitions touch neither: no effect, no promise.
    if (!parks && !ends) return Effect.void
    return Effect.zipRight(parks ? openIndex.add(after.held_id) : Effect.void, ends ? openIndex.remove(after.held_id) : Effect.void).pipe(Effect.ignore)
  }

  // Quiescent held calls this process has removed from the open index (bounded; a miss costs one read).
  const unindexed = new Set<string>()
  /**
   * Level-based removal from the open index: a held call that became quiescent by any path (an
   * action such as admission, a cancel or acknowledgment handled elsewhere, another process)
   * leaves it on its next drive.
   */
  const unindexEnded = (f: HeldCallFacts) => {
    if (!quiescent(f) || !f.held || unindexed.has(f.held_id)) return Effect.void
    return openIndex.removeIfPresent(f.held_id).pipe(
      Effect.tap(() => {
        unindexed.add(f.held_id)
        if (unindexed.size > 10_000) unindexed.delete(unindexed.values().next().value!)
      }),
      Effect.ignore
    )
  }

  const drive = (heldId: string, freshness: Freshness = "fresh") =>
    store.serialized(
      heldId,
      Effect.gen(function* () {
        let last: Loaded | null = null
        const done = (r: Driven) => Effect.as(last !== null ? Effect.zipRight(store.project(last), unindexEnded(last.facts)) : Effect.void, r)
        for (let round = 0; round < MaxRounds; round++) {
          const loaded = yield* store.load(heldId, round === 0 ? freshness : "cached")
          if (loaded === null) return { facts: null, requeueMs: null }
          last = loaded
          let policy = yield* policies.current
          if (loaded.facts.policy_epoch > policy.epoch) policy = yield* policies.refresh
          const plan = reconcile(loaded.facts, contextFor(policy))
          if (plan.events.length > 0) {
            const r = yield* store.append(loaded, plan.events).pipe(Effect.either)
            if (r._tag === "Right") yield* index(loaded.facts, r.right.facts)
            else if (r.left._tag !== "AppendConflict") return yield* r.left
            continue
          }
          const action = plan.actions[0]
          if (action === undefined) {
            return yield* done({ facts: loaded.facts, requeueMs: plan.requeueMs })
          }
          const result = yield* perform(action, loaded, policy).pipe(
            Effect.catchTag("AppendConflict", () => Effect.succeed(progress))
          )
          if (result._tag === "Requeue") return yield* done({ facts: loaded.facts, requeueMs: result.afterMs })
          if (action.kind === "adjudicate") {
            const after = yield* store.load(heldId, "cached")
            if (after !== null) yield* index(loaded.facts, after.facts)
          }
        }
        return yield* done({ facts: last?.facts ?? null, requeueMs: 100 })
      }).pipe(Effect.provide(context))
    )

  return Driver.of({ drive })
})

export const layerDriver = Layer.effect(Driver, makeDriver)
