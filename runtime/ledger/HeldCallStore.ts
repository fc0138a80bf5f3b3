import { Context, Effect, Layer } from "effect"
import type { HeldEvent } from "../schema/Events.js"
import type { HeldCallFacts } from "../schema/Facts.js"
import { evolve, reduce } from "../heldcall/Reducer.js"
import { initialFacts } from "../heldcall/Facts.js"
import { commitSigningKey } from "./CommitSigningKey.js"
import { appendCommit, headAtWith, readCommitsAfterWith, readEventsAfterWith } from "./EventLog.js"
import { type AppendConflict, type LedgerError } from "../schema/LedgerError.js"
import { Nats } from "./Nats.js"
import { recordWritten } from "./WrittenCommits.js"
import { kernelMetrics } from "../observability/KernelMetrics.js"
import { countCommit } from "../observability/CommitMetrics.js"
import { log } from "../observability/Log.js"
import { tracingEnabled, withSpan } from "../observability/Tracing.js"
import { projectFacts, readProjectionWith } from "./Projection.js"

/** How current a load must be: caught up with the stream, any cached view, or at least a sequence. */
export type Freshness = "fresh" | "cached" | number

/** Facts of one held call together with the projection revision they came from. */
export interface Loaded {
  readonly facts: HeldCallFacts
  readonly revision: number
  /**
   * Digest of the call's commit at `facts.last_seq` (the next commit's `prev`), when this
   * process has it: known after a read from the stream or an append, so appends add no read.
   */
  readonly head?: string
}

/**
 * The durable record of held calls: events in `WK_EVENTS`, facts projected in KV.
 * Writers append with expected-last-subject-sequence; a conflict means "re-read and re-plan".
 */
export class HeldCallStore extends Context.Tag("wk/HeldCallStore")<
  HeldCallStore,
  {
    /**
     * Facts of a held call (null: no such call). `fresh` (the default) catches up with the
     * stream; `cached` may answer from this process's recent view, which is safe for writers
     * because every append is CAS'd and a conflict drops the cached view (an answer that writes
     * nothing is not: it is decided again on a fresh load); a number answers
     * from the cache only if it has folded at least that stream sequence.
     */
    readonly load: (heldId: string, freshness?: Freshness) => Effect.Effect<Loaded | null, LedgerError>
    /** Facts folded from the stream alone, ignoring the projection. */
    readonly replay: (heldId: string) => Effect.Effect<HeldCallFacts | null, LedgerError>
    /**
     * Appends events on top of `loaded` as one commit (all stored or none, CAS'd on the facts'
     * `last_seq`); returns the new facts, whose `last_seq` is the commit's stream sequence.
     */
    readonly append: (loaded: Loaded, events: ReadonlyArray<HeldEvent>) => Effect.Effect<Loaded, AppendConflict | LedgerError>
    /**
     * Writes the facts to the KV projection, in the background (the projection is an index
     * that readers catch up from the stream; writing it once per unit of work keeps appends cheap).
     */
    readonly project: (loaded: Loaded) => Effect.Effect<void>
    /** This process's cached view of a call, without any I/O. */
    readonly peek: (heldId: string) => Loaded | undefined
    /** Runs `effect` with no other fiber of this process working on the same held call. */
    readonly serialized: <A, E, R>(heldId: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
    /** Resolves when the work this process has serialized on the call ends; undefined when there is none. */
    readonly whenIdle: (heldId: string) => Promise<void> | undefined
    /** Resolves when no work this process serialized on any call is running (a stopping kernel lets its drives finish). */
    readonly whenAllIdle: () => Promise<void>
  }
>() {}

/** How many held calls' facts one process keeps warm (memory stays flat however many are parked). */
const CacheSize = 2_000

export const makeHeldCallStore = Effect.gen(function* () {
  // Used directly, not provided per operation: providing a service is a fiber-ref update
  // (a context copy and comparison) on every load and append of the hot path.
  const nats = yield* Nats
  const key = yield* commitSigningKey
  const locks = new Map<string, Promise<void>>()
  // Recently used facts, bounded. Never trusted alone: every load catches up from the stream,
  // which is the truth; the cache only saves the projection read.
  const recent = new Map<string, Loaded>()
  // The projection revision only grows: a load or append that began before a projection write
  // was acknowledged must not put back the revision that write replaced (its next write would
  // then conflict, re-read the bucket and write again).
  const remember = (l: Loaded) => {
    const known = recent.get(l.facts.held_id)?.revision ?? 0
    if (known > l.revision) l = { ...l, revision: known }
    recent.delete(l.facts.held_id)
    recent.set(l.facts.held_id, l)
    if (recent.size > CacheSize) recent.delete(recent.keys().next().value!)
    return l
  }

  const load = (heldId: string, freshness: Freshness = "fresh"): Effect.Effect<Loaded | null, LedgerError> => {
    const cached = recent.get(heldId)
    // The drive loop's every round after the first: answered without a fiber step.
    if (cached !== undefined && (freshness === "cached" || (typeof freshness === "number" && cached.facts.last_seq >= freshness))) return Effect.succeed(cached)
    return Effect.gen(function* () {
      const projected = cached ?? (yield* readProjectionWith(nats, heldId))
      const base = projected?.facts ?? initialFacts(heldId)
      const { events: newer, head } = yield* readCommitsAfterWith(nats, heldId, base.last_seq)
      if (projected === null && newer.length === 0) return null
      if (newer.length === 0 && projected !== null) return remember(projected)
      return remember({ facts: reduce(heldId, newer, base), revision: projected?.revision ?? 0, ...(head !== undefined ? { head } : {}) })
    })
  }

  const replay = (heldId: string) =>
    readEventsAfterWith(nats, heldId, 0).pipe(Effect.map((events) => (events.length === 0 ? null : reduce(heldId, events))))

  const append = (loaded: Loaded, events: ReadonlyArray<HeldEvent>): Effect.Effect<Loaded, AppendConflict | LedgerError> => {
    if (events.length === 0) return Effect.succeed(loaded)
    const last = loaded.facts.last_seq
    // The previous commit's digest is known unless the facts came from the projection alone.
    const commit = loaded.head !== undefined || last === 0
      ? appendCommit(nats, events, last, loaded.head ?? "", key)
      : Effect.flatMap(headAtWith(nats, loaded.facts.held_id, last), (prev) => appendCommit(nats, events, last, prev, key))
    const traced = tracingEnabled() ? withSpan("wk.commit", commit, { attributes: { "wk.held_id": loaded.facts.held_id, "wk.events": events.map((e) => e.type) } }) : commit
    return traced.pipe(
      Effect.map(({ seq, head }) => {
        let facts = loaded.facts
        for (let index = 0; index < events.length; index++) facts = evolve(facts, { seq, index, event: events[index]! })
        countCommit(events, loaded.facts, facts)
        if (key !== undefined) recordWritten({ seq, heldId: loaded.facts.held_id, digest: head })
        if (debugging()) for (const e of events) log.debug({ held_id: e.held_id, event: e.type, seq, generation: e.generation }, "committed")
        return remember({ facts, revision: loaded.revision, head })
      }),
      Effect.tapError((e) => Effect.sync(() => {
        if (e._tag === "AppendConflict") kernelMetrics.appendConflicts.inc()
        recent.delete(loaded.facts.held_id)
      }))
    )
  }

  // Highest sequence this process has projected per call (bounded like the cache).
  const projected = new Map<string, number>()
  const project = (loaded: Loaded) =>
    Effect.sync(() => {
      const heldId = loaded.facts.held_id
      const before = projected.get(heldId) ?? 0
      if (before >= loaded.facts.last_seq) return
      // Claimed before the write so concurrent drives of this call do not race to write it.
      projected.delete(heldId)
      projected.set(heldId, loaded.facts.last_seq)
      if (projected.size > CacheSize) projected.delete(projected.keys().next().value!)
      const revision = recent.get(heldId)?.revision ?? loaded.revision
      // A plain promise, not a forked fiber (once per call on the hot path), started as a
      // microtask: it goes out in the same socket write as the reply that follows this drive
      // (the client flushes once its microtasks have run), not in a write of its own.
      queueMicrotask(() =>
        projectFacts(nats, loaded.facts, revision).then(
          (rev) => {
            const cur = recent.get(heldId)
            if (cur !== undefined) recent.set(heldId, { ...cur, revision: Math.max(cur.revision, rev) })
          },
          () => void projected.set(heldId, before)
        )
      )
    })

  const serialized = <A, E, R>(heldId: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      const prev = locks.get(heldId)
      let release!: () => void
      const mine = new Promise<void>((r) => (release = r))
      const chained = prev === undefined ? mine : prev.then(() => mine)
      locks.set(heldId, chained)
      // Uncontended (the common case) runs at once: no promise hop before the work.
      return (prev === undefined ? effect : Effect.zipRight(Effect.promise(() => prev), effect)).pipe(
        Effect.ensuring(
          Effect.sync(() => {
            release()
            if (locks.get(heldId) === chained) locks.delete(heldId)
          })
        )
      )
    })

  const whenAllIdle = async (): Promise<void> => {
    while (locks.size > 0) await Promise.all(locks.values())
  }

  return HeldCallStore.of({ load, replay, append, project, peek: (heldId) => recent.get(heldId), serialized, whenIdle: (heldId) => locks.get(heldId), whenAllIdle })
})

export const layerHeldCallStore = Layer.effect(HeldCallStore, makeHeldCallStore)

/** Whether per-event debug lines are wanted (checked per commit: the usual answer costs one comparison). */
const debugging = (): boolean => log.isLevelEnabled("debug")
