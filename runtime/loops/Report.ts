import { Effect } from "effect"
import { HeldCallStore, type Loaded } from "../ledger/HeldCallStore.js"
import { wake } from "../ledger/Wakes.js"
import type { DependencyReported, DependencyResolved } from "../schema/Events.js"
import { eventOf, progress, requeue } from "./Actions.js"

/** The event id of a child's end on its parent: one per edge, however often it is reported. */
export const resolvedEventId = (parentId: string, childId: string) => `dependency.resolved:${parentId}:${childId}`

/**
 * The `report` action of a nested held call that ended: appends `dependency.resolved` (with
 * the child's outcome) to the parent, wakes the parent durably, then records
 * `dependency.reported` on the child. A crash in between repeats it; the parent's event id
 * makes the repeat one event.
 */
export const report = (loaded: Loaded, driveParent: (heldId: string) => Effect.Effect<void>) =>
  Effect.gen(function* () {
    const store = yield* HeldCallStore
    const f = loaded.facts
    const parentId = f.spec!.parent_held_id!
    const event = eventOf<typeof DependencyResolved.Type>({
      type: "dependency.resolved",
      event_id: resolvedEventId(parentId, f.held_id),
      held_id: parentId,
      generation: 0,
      child_held_id: f.held_id,
      outcome: f.outcome!,
      reasons: f.outcome === "completed" ? [] : f.reasons
    })
    const appended = yield* store.serialized(
      parentId,
      Effect.gen(function* () {
        for (let attempt = 0; attempt < 16; attempt++) {
          const parent = yield* store.load(parentId, attempt === 0 ? "cached" : "fresh")
          if (parent === null) return true
          if (parent.facts.seen.includes(event.event_id)) return true
          const r = yield* store.append(parent, [{ ...event, generation: parent.facts.generation }]).pipe(Effect.either)
          if (r._tag === "Right") return true
          if (r.left._tag !== "AppendConflict") return yield* r.left
        }
        return false
      })
    )
    if (!appended) return requeue(100)
    yield* wake(parentId)
    yield* Effect.forkDaemon(driveParent(parentId))
    yield* store.append(loaded, [
      eventOf<typeof DependencyReported.Type>({
        type: "dependency.reported",
        event_id: `dependency.reported:${f.held_id}:${parentId}`,
        held_id: f.held_id,
        generation: f.generation,
        parent_held_id: parentId
      })
    ])
    return progress
  })
