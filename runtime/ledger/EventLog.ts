import { Effect, Schema } from "effect"
import { HeldEvent, type SequencedEvent } from "../schema/Events.js"
import { Streams, Subjects } from "../schema/Subjects.js"
import { AppendConflict, LedgerError, isWrongLastSequence } from "./LedgerError.js"
import { Nats } from "./Nats.js"

const encoder = new TextEncoder()
const decodeEvent = Schema.decodeUnknownSync(HeldEvent)

/**
 * Appends one event to its held call's subject, only if the subject's last sequence is
 * `expectedLastSeq` (0 for a new call). The event id is the JetStream message id, so the same
 * cause appended twice is stored once; a duplicate is reported as a conflict because the
 * caller's view of the call is then behind.
 */
export const appendEvent = (event: HeldEvent, expectedLastSeq: number) =>
  Effect.gen(function* () {
    const { js } = yield* Nats
    const ack = yield* Effect.tryPromise({
      try: () =>
        js.publish(Subjects.events(event.held_id), encoder.encode(JSON.stringify(event)), {
          msgID: event.event_id,
          expect: { lastSubjectSequence: expectedLastSeq }
        }),
      catch: (cause) =>
        isWrongLastSequence(cause)
          ? new AppendConflict({ heldId: event.held_id, expected: expectedLastSeq })
          : new LedgerError({ operation: "append", message: String(cause), cause })
    })
    if (ack.duplicate) return yield* new AppendConflict({ heldId: event.held_id, expected: expectedLastSeq })
    return ack.seq
  })

/** Reads every event of one held call after stream sequence `afterSeq`, in order. */
export const readEventsAfter = (heldId: string, afterSeq: number) =>
  Effect.gen(function* () {
    const { jsm } = yield* Nats
    return yield* Effect.tryPromise({
      try: async () => {
        const out: Array<SequencedEvent> = []
        let seq = afterSeq + 1
        for (;;) {
          const m = await jsm.direct.getMessage(Streams.events, { next_by_subj: Subjects.events(heldId), seq })
          if (m === null) return out
          out.push({ seq: m.seq, event: decodeEvent(m.json()) })
          seq = m.seq + 1
        }
      },
      catch: (cause) => new LedgerError({ operation: `read events of ${heldId}`, message: String(cause), cause })
    })
  })

/** Decodes one stream message body as an event (for consumers and the auditor). */
export const decodeEventBytes = (data: Uint8Array): HeldEvent => decodeEvent(JSON.parse(new TextDecoder().decode(data)))
