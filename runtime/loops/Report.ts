import { Effect } from "effect"
import { HeldCallStore, type Freshness, type Loaded } from "../ledger/HeldCallStore.js"
import type { LedgerError } from "../schema/LedgerError.js"
import { Wakes } from "../ledger/Wakes.js"
import { dependencyReported } from "../heldcall/plan/Notices.js"
import { decideContextOf } from "../policy/ActivePolicy.js"
import { PolicyStore } from "../policy/PolicyStore.js"
import { progress, requeue } from "./Actions.js"
import { decideAndCommit } from "./internal/decideAndCommit.js"
import { wakeAndDrive } from "./internal/wakeAndDrive.js"

/**
 * The `report` action of a nested held call that ended: its end is decided on the parent
 * (`dependency.resolved`, heldcall/decide/Dependency.ts), the parent is woken durably and driven,
 * then `dependency.reported` is recorded on the child. A crash in between repeats it; the
 * parent's event id makes the repeat one event. The parent is written through the same
 * `decideAndCommit` as every command; `drive` is the driver's own (this runs inside a drive).
 */
export const report = (loaded: Loaded, drive: (heldId: string, freshness: Freshness) => Effect.Effect<unknown, LedgerError>) =>
  Effect.gen(function* () {
    const store = yield* HeldCallStore
    const clock = yield* Effect.clock
    const policy = yield* (yield* PolicyStore).current
    const f = loaded.facts
    const parentId = f.spec!.parent_held_id!
    const { decision } = yield* decideAndCommit(store, parentId, { _tag: "Report", child: f }, () => decideContextOf(policy, clock.unsafeCurrentTimeMillis()))
    if (decision.reply.status === 503) return requeue(100)
    if (decision.drive !== undefined) yield* wakeAndDrive(yield* Wakes, drive, parentId, decision.drive, "fork")
    yield* store.append(loaded, [dependencyReported(f, clock.unsafeCurrentTimeMillis())])
    return progress
  })
