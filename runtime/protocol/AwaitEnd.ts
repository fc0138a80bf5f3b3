import { Effect, Queue } from "effect"
import { HeldCallStore } from "../ledger/HeldCallStore.js"
import { Nats } from "../ledger/Nats.js"
import { Subjects } from "../schema/Subjects.js"
import { proposeReply, type Reply } from "./Replies.js"

/** How often a blocked propose re-reads the call even without a new event (a missed message). */
const RecheckMs = 1_000

/**
 * `wait: {mode: "block", max_ms}`: waits up to `maxMs` for a held call to end (a quick witness
 * approved or refused it) and returns that answer, or null when it is still held at the
 * deadline. Waiting is a subscription on the call's event subject, not a worker: each new
 * event wakes it to re-read the facts.
 */
export const awaitEnd = (heldId: string, maxMs: number) =>
  Effect.gen(function* () {
    const { nc } = yield* Nats
    const store = yield* HeldCallStore
    const deadline = Date.now() + maxMs
    const signal = yield* Queue.sliding<void>(1)
    return yield* Effect.acquireUseRelease(
      Effect.sync(() => nc.subscribe(Subjects.events(heldId), { callback: () => void Queue.unsafeOffer(signal, undefined) })),
      () =>
        Effect.gen(function* () {
          for (;;) {
            const loaded = yield* store.load(heldId)
            const reply: Reply | null = loaded === null ? null : proposeReply(loaded.facts)
            if (reply !== null && reply.status !== 202) return reply
            const left = deadline - Date.now()
            if (left <= 0) return null
            yield* Queue.take(signal).pipe(Effect.timeout(Math.min(left, RecheckMs)), Effect.ignore)
          }
        }),
      (sub) => Effect.sync(() => sub.unsubscribe())
    )
  })
