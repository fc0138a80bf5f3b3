import { Schema } from "effect"
import { HeldEvent, type SequencedEvent } from "./Events.js"

/**
 * One message on `wk.v1.events.<held_id>` in `WK_EVENTS`: the events one decision produced,
 * stored together (atomic, CAS'd on the subject's last sequence). An event is addressed by the
 * commit's stream sequence and its `index` in `events`. Every event names the commit's
 * `held_id`. `commit_id` is the JetStream message id, so the same decision committed twice is
 * stored once. New fields (a signature, the digest of the previous commit) are added as
 * optional fields beside these.
 */
export const Commit = Schema.Struct({
  commit_id: Schema.String,
  held_id: Schema.String,
  events: Schema.NonEmptyArray(HeldEvent)
})
export type Commit = typeof Commit.Type

/**
 * The id of the commit holding `events`: its first event's id. Event ids are derived from their
 * causes, so a decision retried from the same facts gets the same commit id.
 */
export const commitIdOf = (events: ReadonlyArray<HeldEvent>): string => events[0]!.event_id

/** The commit of `events`, all of one held call (the caller checks that; `commitOf` does not). */
export const commitOf = (events: readonly [HeldEvent, ...Array<HeldEvent>]): Commit => ({
  commit_id: commitIdOf(events),
  held_id: events[0].held_id,
  events
})

const decodeCommit = Schema.decodeUnknownSync(Commit)
const decoder = new TextDecoder()
const encoder = new TextEncoder()

/** A commit as stored: its JSON text. */
export const encodeCommit = (commit: Commit): Uint8Array => encoder.encode(JSON.stringify(commit))

/** Decodes one stored message body as a commit; throws when it is not one. */
export const decodeCommitBytes = (data: Uint8Array): Commit => decodeCommit(JSON.parse(decoder.decode(data)))

/** The events of the commit stored at `seq`, each with its address (seq, index). */
export const sequencedEvents = (seq: number, commit: Commit): Array<SequencedEvent> => commit.events.map((event, index) => ({ seq, index, event }))

/** A stored message body decoded into its addressed events; throws when it is not a commit. */
export const eventsOfMessage = (seq: number, data: Uint8Array): Array<SequencedEvent> => sequencedEvents(seq, decodeCommitBytes(data))
