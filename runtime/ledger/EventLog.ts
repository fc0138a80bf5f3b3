import { type Context, Effect } from "effect"
import { chainCommit, commitDigest, commitOf, eventsOfMessage, encodeCommit, type CommitKey } from "../schema/Commit.js"
import type { HeldEvent, SequencedEvent } from "../schema/Events.js"
import { Streams, Subjects } from "../schema/Subjects.js"
import { AppendConflict, LedgerError, isWrongLastSequence } from "../schema/LedgerError.js"
import { Nats } from "./Nats.js"
import { archivedCommitDigest } from "./ArchivedHead.js"

/** `appendEvents` of one event on the `Nats` service: the commit's stream sequence. */
export const appendEvent = (event: HeldEvent, expectedLastSeq: number) => Effect.flatMap(Nats, (nats) => appendEvents(nats, [event], expectedLastSeq))

/** Where a stored commit sits: its stream sequence and its digest (the next commit's `prev`). */
export interface StoredCommit {
  readonly seq: number
  readonly head: string
}

/**
 * Appends `events` (one held call's, at least one) as ONE commit on the call's subject, only if
 * the subject's last sequence is `expectedLastSeq` (0 for a new call): all of them are stored or
 * none is. The commit names `prev`, the digest of the call's previous commit ("" for the first),
 * and is signed with `key` when the kernel has one. The commit id is the JetStream message id,
 * so the same decision committed twice is stored once; a duplicate is reported as a conflict
 * because the caller's view of the call is then behind. One promise and one effect step: this
 * is the hot path of every call.
 */
export const appendCommit = (
  nats: Context.Tag.Service<typeof Nats>,
  events: ReadonlyArray<HeldEvent>,
  expectedLastSeq: number,
  prev: string,
  key: CommitKey | undefined
): Effect.Effect<StoredCommit, AppendConflict | LedgerError> => {
  const first = events[0]
  if (first === undefined) return Effect.dieMessage("a commit holds at least one event")
  const heldId = first.held_id
  const stray = events.find((e) => e.held_id !== heldId)
  if (stray !== undefined) return Effect.dieMessage(`a commit of ${heldId} cannot hold an event of ${stray.held_id} (${stray.event_id})`)
  const commit = chainCommit(commitOf([first, ...events.slice(1)]), prev, key)
  const bytes = encodeCommit(commit)
  return Effect.async<StoredCommit, AppendConflict | LedgerError>((resume) => {
    nats.publish(Subjects.events(heldId), bytes, { msgID: commit.commit_id, lastSubjectSequence: expectedLastSeq }).then(
      // A duplicate means the caller's view of the call is behind.
      (ack) => resume(ack.duplicate ? Effect.fail(new AppendConflict({ heldId, expected: expectedLastSeq })) : Effect.succeed({ seq: ack.seq, head: commitDigest(bytes) })),
      (cause) =>
        resume(Effect.fail(isWrongLastSequence(cause) ? new AppendConflict({ heldId, expected: expectedLastSeq }) : new LedgerError({ operation: "append", message: String(cause), cause })))
    )
  })
}

/**
 * `appendCommit` without a signature, its `prev` read from the subject's last message: the
 * store's way is `appendCommit` with the digest it keeps; this one serves tools and tests.
 * Succeeds with the commit's stream sequence.
 */
export const appendEvents = (
  nats: Context.Tag.Service<typeof Nats>,
  events: ReadonlyArray<HeldEvent>,
  expectedLastSeq: number
): Effect.Effect<number, AppendConflict | LedgerError> =>
  Effect.flatMap(headAtWith(nats, events[0]?.held_id ?? "", expectedLastSeq), (prev) => appendCommit(nats, events, expectedLastSeq, prev, undefined)).pipe(Effect.map((c) => c.seq))

/**
 * The digest of the commit stored at `seq` ("" for 0: a call's first commit names no previous
 * one), from the stream or, when archiving purged it, from its archive.
 */
export const headAtWith = (nats: Context.Tag.Service<typeof Nats>, heldId: string, seq: number): Effect.Effect<string, LedgerError> =>
  seq === 0
    ? Effect.succeed("")
    : Effect.tryPromise({
        try: async () => {
          const m = await nats.jsm.direct.getMessage(Streams.events, { seq })
          if (m !== null) return commitDigest(m.data)
          // Purged by archiving: the archive holds the bytes the next commit must name.
          return (await archivedCommitDigest(nats.nc, nats.js, heldId, seq)) ?? ""
        },
        catch: (cause) => new LedgerError({ operation: `read commit ${seq} of ${heldId}`, message: String(cause), cause })
      })

/** Events of one held call in commits after a sequence, and the digest of its last commit read (undefined: none read). */
export interface CommitsAfter {
  readonly events: Array<SequencedEvent>
  readonly head: string | undefined
}

/** Every event of one held call in commits after stream sequence `afterSeq`, in order (direct gets), with the last commit's digest. */
export const readCommitsAfterWith = (nats: Context.Tag.Service<typeof Nats>, heldId: string, afterSeq: number) =>
  Effect.tryPromise({
    try: async (): Promise<CommitsAfter> => {
      const events: Array<SequencedEvent> = []
      let head: string | undefined
      let seq = afterSeq + 1
      for (;;) {
        const m = await nats.jsm.direct.getMessage(Streams.events, { next_by_subj: Subjects.events(heldId), seq })
        if (m === null) return { events, head }
        for (const e of eventsOfMessage(m.seq, m.data)) events.push(e)
        head = commitDigest(m.data)
        seq = m.seq + 1
      }
    },
    catch: (cause) => new LedgerError({ operation: `read events of ${heldId}`, message: String(cause), cause })
  })

/** Every event of one held call in commits after stream sequence `afterSeq`, in order (direct gets), on a given connection. */
export const readEventsAfterWith = (nats: Context.Tag.Service<typeof Nats>, heldId: string, afterSeq: number) =>
  Effect.map(readCommitsAfterWith(nats, heldId, afterSeq), (r) => r.events)

/** `readEventsAfterWith` on the `Nats` service. */
export const readEventsAfter = (heldId: string, afterSeq: number) => Effect.flatMap(Nats, (nats) => readEventsAfterWith(nats, heldId, afterSeq))
