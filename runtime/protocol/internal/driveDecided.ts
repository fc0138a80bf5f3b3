import { Deferred, Effect } from "effect"
import { HeldCallStore, type Loaded } from "../../ledger/HeldCallStore.js"
import type { AppendConflict, LedgerError } from "../../ledger/LedgerError.js"
import { Driver } from "../../loops/Driver.js"
import type { HeldCallFacts } from "../../schema/Facts.js"
import { notFound, unavailable, type Reply } from "../Replies.js"
import type { Decided } from "./appendDecided.js"

/**
 * `appendDecided` whose event joins the drive it enables: read the facts, decide, and hand the
 * event to a drive of the call (forked: it goes on after the reply), which commits it with what
 * the call does next up to its first I/O (an attestation that releases a call: one commit with
 * readiness and the execution claim). Answers once that commit holds the event; a conflict
 * decides again on fresh facts. Unknown call: 404.
 */
export const driveDecided = (heldId: string, decide: (facts: HeldCallFacts) => Decided) =>
  Effect.gen(function* () {
    const store = yield* HeldCallStore
    const driver = yield* Driver
    for (let attempt = 0; attempt < 16; attempt++) {
      const loaded = yield* store.load(heldId, attempt === 0 ? "cached" : "fresh")
      if (loaded === null || loaded.facts.spec === null) return { reply: notFound(heldId), appended: null }
      const d = decide(loaded.facts)
      if (d.event === undefined) return { reply: d.reply, appended: null }
      const committed = yield* Deferred.make<Loaded, LedgerError | AppendConflict>()
      yield* Effect.forkDaemon(driver.driveFrom(heldId, { base: loaded, pending: [d.event], firstCommit: committed }).pipe(Effect.ignore))
      const r = yield* Deferred.await(committed).pipe(Effect.either)
      if (r._tag === "Right") return { reply: d.reply as Reply, appended: r.right }
      if (r.left._tag !== "AppendConflict") return yield* r.left
    }
    return { reply: unavailable(`held call ${heldId} is changing too fast; retry`), appended: null }
  })
