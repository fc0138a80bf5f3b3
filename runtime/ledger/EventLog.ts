import { type Context, Effect, Schema } from "effect"
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
  Effect.flatMap(Nats, (nats) => appendEvents(nats, [event], expectedLastSeq, () => undefined))

/**
 * Appends `events` one after the other, each on the sequence the previous one got (each is
 * CAS'd; an append never starts before the previous ack, so the subject's order is the given
 * order). `appended` sees each stored event with its sequence. One promise loop and one
 * effect step, not one fiber step per event: this is the hot path of every call. Succeeds with
 * `done(last sequence)`; `failed` runs before a failure is reported.
 */
export const appendEvents = <A = number>(
  nats: Context.Tag.Service<typeof Nats>,
  events: ReadonlyArray<HeldEvent>,
  expectedLastSeq: number,
  appended: (seq: number, event: HeldEvent) => void,
  done: (lastSeq: number) => A = (lastSeq) => lastSeq as A,
  failed: () => void = () => undefined
): Effect.Effect<A, AppendConflict | LedgerError> =>
  Effect.async<A, AppendConflict | LedgerError>((resume) => {
    let expected = expectedLastSeq
    const fail = (e: AppendConflict | LedgerError) => {
      failed()
      resume(Effect.fail(e))
    }
    const run = async () => {
      for (const event of events) {
        let ack
        try {
          ack = await nats.publish(Subjects.events(event.held_id), encoder.encode(JSON.stringify(event)), { msgID: event.event_id, lastSubjectSequence: expected })
        } catch (cause) {
          return fail(isWrongLastSequence(cause) ? new AppendConflict({ heldId: event.held_id, expected }) : new LedgerError({ operation: "append", message: String(cause), cause }))
        }
        // A duplicate means the caller's view of the call is behind.
        if (ack.duplicate) return fail(new AppendConflict({ heldId: event.held_id, expected }))
        appended(ack.seq, event)
        expected = ack.seq
      }
      resume(Effect.succeed(done(expected)))
    }
    // A throw outside the publish (in `appended` or `done`) is a defect, not a fiber left waiting forever.
    run().catch((e) => resume(Effect.die(e)))
  })

/** Reads every event of one held call after stream sequence `afterSeq`, in order (direct gets), on a given connection. */
export const readEventsAfterWith = (nats: Context.Tag.Service<typeof Nats>, heldId: string, afterSeq: number) =>
  Effect.tryPromise({
    try: async () => {
      const out: Array<SequencedEvent> = []
      let seq = afterSeq + 1
      for (;;) {
        const m = await nats.jsm.direct.getMessage(Streams.events, { next_by_subj: Subjects.events(heldId), seq })
        if (m === null) return out
        out.push({ seq: m.seq, event: decodeEvent(m.json()) })
        seq = m.seq + 1
      }
    },
    catch: (cause) => new LedgerError({ operation: `read events of ${heldId}`, message: String(cause), cause })
  })

/** `readEventsAfterWith` on the `Nats` service. */
export const readEventsAfter = (heldId: string, afterSeq: number) => Effect.flatMap(Nats, (nats) => readEventsAfterWith(nats, heldId, afterSeq))

/** Decodes one stream message body as an event (for consumers and the auditor). */
export const decodeEventBytes = (data: Uint8Array): HeldEvent => decodeEvent(JSON.parse(new TextDecoder().decode(data)))
