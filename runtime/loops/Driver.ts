import { Context, Deferred, Effect, Exit, Layer } from "effect"
import { HeldCallStore, type Freshness, type Loaded } from "../ledger/HeldCallStore.js"
import type { AppendConflict, LedgerError } from "../schema/LedgerError.js"
import type { LedgerPorts } from "../ledger/LedgerPorts.js"
import { OpenIndex } from "../ledger/OpenIndex.js"
import { ToolClient } from "../ledger/ToolClient.js"
import { Wakes } from "../ledger/Wakes.js"
import { PolicyStore } from "../policy/PolicyStore.js"
import { Adjudicator } from "../policy/Adjudicator.js"
import { Admission } from "../policy/Admission.js"
import { registryOf, type ActivePolicy } from "../policy/ActivePolicy.js"
import { KernelConfig } from "../KernelConfig.js"
import { reconcile, type Action, type ReconcileContext } from "../heldcall/Reconciler.js"
import { announceWith, type Announce } from "../heldcall/ReplyPath.js"
import { foldUncommitted as fold } from "../heldcall/Reducer.js"
import type { HeldEvent } from "../schema/Events.js"
import type { HeldCallFacts } from "../schema/Facts.js"
import { quiescent, settled } from "../heldcall/Facts.js"
import { claim, invoke, recordSurely, resolve } from "./Executor.js"
import { adjudicate } from "./Adjudicate.js"
import { admit } from "./Admit.js"
import { deliver } from "./Deliver.js"
import { report } from "./Report.js"
import { remind } from "./Remind.js"
import { progress, type ActionResult } from "./Actions.js"

/** Where one drive left a held call: its facts, and when to look again (null: only on a new event). */
export interface Driven {
  readonly facts: HeldCallFacts | null
  readonly requeueMs: number | null
}

/**
 * Events a command just decided on facts it loaded, handed to the drive that follows so they
 * are committed together with what the call does next up to its first I/O (the proposal with
 * its verdict and execution claim: one commit).
 */
export interface Handed {
  /** The committed facts the events were decided on (their sequence is the commit's expectation). */
  readonly base: Loaded
  readonly pending: ReadonlyArray<HeldEvent>
  /**
   * Completed once the handed events are durable (with the facts after the commit that carried
   * them), or failed as the drive fails before that: a handler replies then, while the drive goes
   * on (the attestation that releases a call is answered once its commit holds it).
   */
  readonly firstCommit?: Deferred.Deferred<Loaded, LedgerError | AppendConflict>
  /**
   * The wake written with the first commit (heldcall/ReplyPath.ts), so another process finishes
   * the call if this one stops; none when that commit carries the execution claim (its own wake
   * says who drives). With nothing handed, it is written before the drive starts.
   */
  readonly announce?: Announce
}

/** Most plan/act rounds one drive makes before it yields (the call is requeued, never spun). */
const MaxRounds = 32

/**
 * Drives one held call toward its desired state: read facts, reconcile, decide in memory,
 * perform one enabled action, repeat until nothing is enabled. Level-based: it never asks
 * which event woke it. Several processes may drive the same call; leases and
 * expected-sequence appends make that safe.
 *
 * One commit per decision: the events of consecutive steps that need no I/O outside the
 * process (local derivations, the verdict, readiness, admission; plugins run in process) are
 * folded in memory and committed in one append before anything leaves the process. An ALLOW
 * call is two commits: the verdict with the execution claim (its recovery wake in the same
 * flush) before the tool, the effect with its admission after it.
 */
export class Driver extends Context.Tag("wk/Driver")<
  Driver,
  {
    /** `freshness` applies to the first read; later rounds read this process's own appends. */
    readonly drive: (heldId: string, freshness?: Freshness) => Effect.Effect<Driven, LedgerError>
    /**
     * Drives on top of events a command decided on `handed.base`, committing them in the
     * drive's first commit. Fails with `AppendConflict`, having written nothing, when that
     * commit finds the call changed since `base`: the command decides again on fresh facts.
     * Not to be called while holding the call's `serialized` section (the drive takes it).
     */
    readonly driveFrom: (heldId: string, handed: Handed) => Effect.Effect<Driven, LedgerError | AppendConflict>
  }
>() {}

export const makeDriver = Effect.gen(function* () {
  const context = yield* Effect.context<LedgerPorts | PolicyStore | Adjudicator | Admission | KernelConfig>()
  const store = Context.get(context, HeldCallStore)
  const policies = Context.get(context, PolicyStore)
  const openIndex = Context.get(context, OpenIndex)
  const wakes = Context.get(context, Wakes)
  const tools = Context.get(context, ToolClient)
  const admission = Context.get(context, Admission)
  const config = Context.get(context, KernelConfig)
  const { delivery } = config
  // The drive's clock: every time a plan sees (TestClock's under test).
  const clock = yield* Effect.clock
  const now = () => clock.unsafeCurrentTimeMillis()

  const contextFor = (policy: ActivePolicy, uncommitted: number): ReconcileContext => ({
    now: now(),
    policyEpoch: policy.epoch,
    ...registryOf(policy),
    delivery,
    uncommitted
  })

  type Deps = LedgerPorts | PolicyStore | Adjudicator | Admission | KernelConfig
  /** Actions whose I/O leaves the process and that write their own events, on committed facts. */
  const performCommitted = (action: Action, loaded: Loaded): Effect.Effect<ActionResult, LedgerError | AppendConflict, Deps> => {
    switch (action.kind) {
      case "resolve":
        return resolve(loaded.facts.held_id)
      case "deliver":
        return deliver(loaded)
      case "report":
        return report(loaded, drive)
      case "remind":
        return remind(loaded)
      default:
        return Effect.succeed(progress)
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

  /**
   * One drive. `loaded` is the committed view; `view` is it with `pending` folded in (what the
   * next step plans on). `commit` appends `pending` as one append and runs what waits on it.
   */
  /** Starts writing a command's wake (`Wakes.begin`: the write goes out with the next one); the effect awaits it. */
  const announceWake = (heldId: string, announce: Announce): Effect.Effect<void, LedgerError> =>
    announce === "none" ? Effect.void : wakes.begin(heldId, announce === "driving" ? { owner: config.owner, until: now() + config.leaseMs } : undefined)

  const run = (heldId: string, first: Loaded | null, handed: ReadonlyArray<HeldEvent>, firstCommit?: Deferred.Deferred<Loaded, LedgerError | AppendConflict>, announce: Announce = "none") =>
    Effect.gen(function* () {
      if (first === null) return { facts: null, requeueMs: null } satisfies Driven
      if (handed.length === 0 && announce !== "none") yield* announceWake(heldId, announce)
      if (handed.length === 0 && firstCommit !== undefined) Deferred.unsafeDone(firstCommit, Exit.succeed(first))
      let loaded: Loaded = first
      let pending: Array<HeldEvent> = [...handed]
      let view: HeldCallFacts = fold(loaded.facts, pending)
      // Events a command handed in: a conflict on them is the command's to retry, not ours to drop.
      let handedPending = handed.length > 0
      // An effect that happened but is not yet committed: a conflict re-reads and records it surely.
      let effect: HeldEvent | null = null
      let afterCommit: Array<Effect.Effect<void, LedgerError, Deps>> = []

      /** Commits `pending` (one append); false when a conflict dropped it and `loaded` was re-read. */
      const commit = Effect.gen(function* () {
        if (pending.length === 0) return true
        const woken = handedPending ? announceWake(heldId, announceWith(announce, pending)) : Effect.void
        const r = yield* store.append(loaded, pending).pipe(Effect.either)
        const hooks = afterCommit
        pending = []
        afterCommit = []
        if (r._tag === "Right") {
          const before = loaded.facts
          loaded = r.right
          view = loaded.facts
          if (handedPending) {
            yield* woken
            if (firstCommit !== undefined) Deferred.unsafeDone(firstCommit, Exit.succeed(loaded))
          }
          handedPending = false
          effect = null
          yield* index(before, loaded.facts)
          for (const hook of hooks) yield* hook
          return true
        }
        if (r.left._tag !== "AppendConflict" || handedPending) return yield* r.left
        const fresh = yield* store.load(heldId, "fresh")
        if (fresh === null) return yield* r.left
        if (effect !== null) {
          yield* recordSurely(fresh, effect)
          effect = null
          loaded = (yield* store.load(heldId, "cached")) ?? fresh
        } else loaded = fresh
        view = loaded.facts
        return false
      })

      const done = (requeueMs: number | null) => {
        // Settled by this drive: the wake it wrote as it claimed the call is no other kernel's business.
        if (settled(loaded.facts)) wakes.retire(heldId)
        return Effect.as(Effect.zipRight(store.project(loaded), unindexEnded(loaded.facts)), { facts: loaded.facts, requeueMs } satisfies Driven)
      }

      for (let round = 0; round < MaxRounds; round++) {
        let policy = yield* policies.current
        if (view.policy_epoch > policy.epoch) policy = yield* policies.refresh
        const ctx = contextFor(policy, pending.length)
        const plan = reconcile(view, ctx)
        if (plan.events.length > 0) {
          pending.push(...plan.events)
          view = plan.facts
          continue
        }
        const action = plan.actions[0]
        if (action === undefined) {
          if (!(yield* commit)) continue
          return yield* done(plan.requeueMs)
        }
        switch (action.kind) {
          case "adjudicate": {
            const a = yield* adjudicate(view, policy, ctx.now)
            pending.push(...a.events)
            view = fold(view, a.events)
            if (a.committed !== null) afterCommit.push(a.committed)
            continue
          }
          case "admit": {
            const event = yield* admit(admission, view, policy, ctx.now)
            pending.push(event)
            view = fold(view, [event])
            continue
          }
          case "execute": {
            if (config.executorPaused()) {
              if (!(yield* commit)) continue
              return yield* done(100)
            }
            const c = claim(view, ctx, config.owner, config.leaseMs)
            if (c === null) continue
            pending.push(...c.events)
            // The wake is durable before anything irreversible (if this process dies, the
            // controller resumes here); it goes out in the same flush as the claim's commit.
            const woken = wakes.begin(heldId, { owner: config.owner, until: c.leaseUntil })
            const committed = yield* commit
            yield* woken
            if (!committed) continue
            const event = yield* invoke(tools, config.toolTimeoutMs, loaded.facts, policy, now)
            effect = event
            pending.push(event)
            view = fold(view, [event])
            continue
          }
          default: {
            if (!(yield* commit)) continue
            const result = yield* performCommitted(action, loaded).pipe(Effect.catchTag("AppendConflict", () => Effect.succeed(progress)))
            loaded = (yield* store.load(heldId, "cached")) ?? loaded
            view = loaded.facts
            if (result._tag === "Requeue") return yield* done(result.afterMs)
          }
        }
      }
      yield* commit
      return yield* done(100)
    })

  const drive = (heldId: string, freshness: Freshness = "fresh") =>
    store.serialized(
      heldId,
      Effect.flatMap(store.load(heldId, freshness), (first) => run(heldId, first, [])).pipe(
        // Only a call gone between a conflict and its re-read: nothing to drive now.
        Effect.catchTag("AppendConflict", () => Effect.succeed<Driven>({ facts: null, requeueMs: 100 })),
        Effect.provide(context)
      )
    )

  const driveFrom = (heldId: string, handed: Handed) => {
    const started = store.serialized(heldId, run(heldId, handed.base, handed.pending, handed.firstCommit, handed.announce).pipe(Effect.provide(context)))
    const signal = handed.firstCommit
    if (signal === undefined) return started
    return started.pipe(Effect.onExit((exit) => (Exit.isFailure(exit) ? Deferred.failCause(signal, exit.cause) : Effect.void)))
  }

  return Driver.of({ drive, driveFrom })
})

export const layerDriver = Layer.effect(Driver, makeDriver)
