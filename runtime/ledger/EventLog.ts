import { type Context, Effect } from "effect"
import { commitOf, eventsOfMessage, encodeCommit } from "../schema/Commit.js"
import type { HeldEvent, SequencedEvent } from "../schema/Events.js"
import { Streams, Subjects } from "../schema/Subjects.js"
import { AppendConflict, LedgerError, isWrongLastSequence } from "./LedgerError.js"
import { Nats } from "./Nats.js"

/** `appendEvents` of one event on the `Nats` service: the commit's stream sequence. */
export const appendEvent = (event: HeldEvent, expectedLastSeq: number) => Effect.flatMap(Nats, (nats) => appendEvents(nats, [event], expectedLastSeq))

/**
 * Appends `events` (one held call's, at least one) as ONE commit on the call's subject, only if
 * the subject's last sequence is `expectedLastSeq` (0 for a new call): all of them are stored or
 * none is. The commit id is the JetStream message id, so the same decision committed twice is
 * stored once; a duplicate is reported as a conflict because the caller's view of the call is
 * then behind. Succeeds with the commit's stream sequence. One promise and one effect step: this
 * is the hot path of every call.
 */
export const appendEvents = (
  nats: Context.Tag.Service<typeof Nats>,
  events: ReadonlyArray<HeldEvent>,
  expectedLastSeq: number
): Effect.Effect<number, AppendConflict | LedgerError> => {
  const first = events[0]
  if (first === undefined) return Effect.dieMessage("a commit holds at least one event")
  const heldId = first.held_id
  const stray = events.find((e) => e.held_id !== heldId)
  if (stray !== undefined) return Effect.dieMessage(`a commit of ${heldId} cannot hold an event of ${stray.held_id} (${stray.event_id})`)
  const commit = commitOf([first, ...events.slice(1)])
  return Effect.async<number, AppendConflict | LedgerError>((resume) => {
    nats.publish(Subjects.events(heldId), encodeCommit(commit), { msgID: commit.commit_id, lastSubjectSequence: expectedLastSeq }).then(
      // A duplicate means the caller's view of the call is behind.
      (ack) => resume(ack.duplicate ? Effect.fail(new AppendConflict({ heldId, expected: expectedLastSeq })) : Effect.succeed(ack.seq)),
      (cause) =>
        resume(Effect.fail(isWrongLastSequence(cause) ? new AppendConflict({ heldId, expected: expectedLastSeq }) : new LedgerError({ operation: "append", message: String(cause), cause })))
    )
  })
}

/** Every event of one held call in commits after stream sequence `afterSeq`, in order (direct gets), on a given connection. */
export const readEventsAfterWith = (nats: Context.Tag.Service<typeof Nats>, heldId: string, afterSeq: number) =>
  Effect.tryPromise({
    try: async () => {
      const out: Array<SequencedEvent> = []
      let seq = afterSeq + 1
      for (;;) {
        const m = await nats.jsm.direct.getMessage(Streams.events, { next_by_subj: Subjects.events(heldId), seq })
        if (m === null) return out
        for (const e of eventsOfMessage(m.seq, m.data)) out.push(e)
        seq = m.seq + 1
      }
    },
    catch: (cause) => new LedgerError({ operation: `read events of ${heldId}`, message: String(cause), cause })
  })

/** `readEventsAfterWith` on the `Nats` service. */
export const readEventsAfter = (heldId: string, afterSeq: number) => Effect.flatMap(Nats, (nats) => readEventsAfterWith(nats, heldId, afterSeq))
