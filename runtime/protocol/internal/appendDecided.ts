import { Effect } from "effect"
import { HeldCallStore } from "../../ledger/HeldCallStore.js"
import type { HeldEvent } from "../../schema/Events.js"
import type { HeldCallFacts } from "../../schema/Facts.js"
import { notFound, unavailable, type Reply } from "../Replies.js"

/** What a handler decided on the facts it read: answer now, or append one event and then answer. */
export type Decided = { readonly reply: Reply; readonly event?: HeldEvent }

/**
 * The write path of the signed handlers: under the call's in-process lock, read the facts,
 * decide, append with expected sequence, and on a conflict read again and decide again.
 * Unknown call: 404. Returns the reply and, when an event was appended, the new facts.
 */
export const appendDecided = (heldId: string, decide: (facts: HeldCallFacts) => Decided) =>
  Effect.gen(function* () {
    const store = yield* HeldCallStore
    return yield* store.serialized(
      heldId,
      Effect.gen(function* () {
        for (let attempt = 0; attempt < 16; attempt++) {
          const loaded = yield* store.load(heldId, "cached")
          if (loaded === null || loaded.facts.spec === null) return { reply: notFound(heldId), appended: null }
          const d = decide(loaded.facts)
          if (d.event === undefined) return { reply: d.reply, appended: null }
          const r = yield* store.append(loaded, [d.event]).pipe(Effect.either)
          if (r._tag === "Right") return { reply: d.reply, appended: r.right }
          if (r.left._tag !== "AppendConflict") return yield* r.left
        }
        return { reply: unavailable(`held call ${heldId} is changing too fast; retry`), appended: null }
      })
    )
  })
