import { Effect, Layer } from "effect"
import type { HeldEvent, SequencedEvent } from "../../schema/Events.js"
import type { HeldCallFacts } from "../../schema/Facts.js"
import { evolve, reduce } from "../../heldcall/Reducer.js"
import { initialFacts } from "../../heldcall/Facts.js"
import { HeldCallStore, type Loaded } from "../HeldCallStore.js"
import { AppendConflict } from "../../schema/LedgerError.js"
import { keyedLock } from "./KeyedLock.js"

/**
 * The held-call store in memory, with the NATS store's semantics: one sequence across all calls,
 * an append only on top of the call's last sequence (`AppendConflict` otherwise), an event id
 * stored once (a repeat is a conflict: the writer's view is behind). An append is atomic. Each
 * call's events are kept in order; its facts are folded as they are appended (`evolve`) and a
 * replay folds the events again (`reduce`).
 */
export const makeMemoryHeldCallStore = Effect.sync(() => {
  let lastSeq = 0
  const logs = new Map<string, Array<SequencedEvent>>()
  const facts = new Map<string, HeldCallFacts>()
  const ids = new Map<string, Set<string>>()
  const lock = keyedLock()

  const load = (heldId: string) => Effect.sync((): Loaded | null => {
    const f = facts.get(heldId)
    return f === undefined ? null : { facts: f, revision: 0 }
  })

  const append = (loaded: Loaded, events: ReadonlyArray<HeldEvent>) =>
    Effect.suspend(() => {
      if (events.length === 0) return Effect.succeed(loaded)
      const heldId = loaded.facts.held_id
      const current = facts.get(heldId) ?? initialFacts(heldId)
      const seen = ids.get(heldId) ?? new Set<string>()
      if (current.last_seq !== loaded.facts.last_seq || events.some((e) => seen.has(e.event_id) || e.held_id !== heldId)) {
        return Effect.fail(new AppendConflict({ heldId, expected: loaded.facts.last_seq }))
      }
      const log = logs.get(heldId) ?? []
      // One append is one commit: one sequence, each event at its index.
      const seq = ++lastSeq
      let next = current
      events.forEach((event, index) => {
        const sequenced = { seq, index, event }
        next = evolve(next, sequenced)
        log.push(sequenced)
        seen.add(event.event_id)
      })
      logs.set(heldId, log)
      ids.set(heldId, seen)
      facts.set(heldId, next)
      return Effect.succeed({ facts: next, revision: 0 })
    })

  return HeldCallStore.of({
    load,
    replay: (heldId) =>
      Effect.sync(() => {
        const log = logs.get(heldId)
        return log === undefined ? null : reduce(heldId, log)
      }),
    append,
    project: () => Effect.void,
    peek: (heldId) => {
      const f = facts.get(heldId)
      return f === undefined ? undefined : { facts: f, revision: 0 }
    },
    serialized: lock.run,
    whenIdle: lock.whenIdle,
    whenAllIdle: lock.whenAllIdle
  })
})

export const layerMemoryHeldCallStore = Layer.effect(HeldCallStore, makeMemoryHeldCallStore)
