import { Effect } from "effect"
import type { Freshness, HeldCallStore, Loaded } from "../../ledger/HeldCallStore.js"
import type { AppendConflict, LedgerError } from "../../schema/LedgerError.js"
import { initialFacts } from "../../heldcall/Facts.js"
import { decide, type Command, type DecideContext, type Decision } from "../../heldcall/Decide.js"
import { unavailable } from "../../schema/Reply.js"

/** Most times one command is decided again after its commit met a concurrent write. */
export const MaxAttempts = 16

/** A decision and, when it wrote anything, the facts after its commit. */
export interface Committed {
  readonly decision: Decision
  readonly committed: Loaded | null
}

/** A decision and what committing it gave, or null when it wrote nothing (or the call changed too fast). */
export interface Decided<A> {
  readonly decision: Decision
  readonly written: A | null
}

/** Commands that usually create their call: tried first on this process's view (or on nothing), read only after a conflict. */
const creates = (c: Command) => c._tag === "Propose" || c._tag === "ProposeRefused"

/**
 * The decide loop of every command, once: load the call's facts, decide, hand the decision's
 * events to `commit` (which appends them with the expected sequence of the facts decided on),
 * and on a conflict load again and decide again. A call that does not exist is decided on its
 * initial facts (a proposal creates it; anything else answers 404). After `MaxAttempts`
 * conflicts the answer is 503: the call is changing too fast. `contextAt` is asked once per
 * attempt, so every attempt decides at its own time.
 *
 * The first attempt decides on this process's recent view. That is safe for a decision that
 * writes (its commit is CAS'd on the view), not for one that writes nothing: a refusal or a
 * repeat decided on a view another process has moved on since (an acknowledgment of a delivery
 * another kernel made, refused as "not ended") would be a wrong answer. So a decision that
 * writes nothing is the answer only once it was made on facts caught up with the stream. With
 * `repeats`, such a decision that leaves the call work is handed to `commit` too (with no events).
 */
export const decideUntilCommitted = <A, R>(
  store: HeldCallStore["Type"],
  heldId: string,
  command: Command,
  contextAt: () => DecideContext,
  commit: (loaded: Loaded, decision: Decision) => Effect.Effect<A, AppendConflict | LedgerError, R>,
  options: { readonly repeats?: boolean } = {}
): Effect.Effect<Decided<A>, LedgerError, R> =>
  Effect.gen(function* () {
    let freshness: Freshness = "cached"
    for (let attempt = 0; attempt < MaxAttempts; attempt++) {
      const loaded: Loaded = (attempt === 0 && creates(command) ? store.peek(heldId) : yield* store.load(heldId, freshness)) ?? { facts: initialFacts(heldId), revision: 0 }
      const decision = decide(command, loaded.facts, contextAt())
      if (decision.events.length === 0) {
        if (freshness !== "fresh") {
          freshness = "fresh"
          continue
        }
        // A repeat that leaves the call work (its events were recorded by an earlier request, whose
        // process may have stopped before it drove the call) is handed on with `repeats`.
        if (decision.drive === undefined || options.repeats !== true) return { decision, written: null }
      }
      const r = yield* commit(loaded, decision).pipe(Effect.either)
      if (r._tag === "Right") return { decision, written: r.right }
      if (r.left._tag !== "AppendConflict") return yield* r.left
      freshness = "fresh"
    }
    return { decision: { reply: unavailable(`held call ${heldId} is changing too fast; retry`), events: [] }, written: null }
  })

/**
 * The write path of most commands: `decideUntilCommitted` under the call's in-process lock, each
 * decision committed as one append.
 */
export const decideAndCommit = (store: HeldCallStore["Type"], heldId: string, command: Command, contextAt: () => DecideContext): Effect.Effect<Committed, LedgerError> =>
  store.serialized(
    heldId,
    Effect.map(decideUntilCommitted(store, heldId, command, contextAt, (loaded, decision) => store.append(loaded, decision.events)), ({ decision, written }) => ({ decision, committed: written }))
  )
