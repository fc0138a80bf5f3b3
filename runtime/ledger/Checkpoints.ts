import { type Context, Effect, Either } from "effect"
import type { CommitKey } from "../schema/Commit.js"
import { CheckpointSubject, type CheckpointHead, checkpointDigest, decodeCheckpoint, encodeCheckpoint, headsOf, signCheckpoint, type Checkpoint } from "../schema/Checkpoint.js"
import { Streams, Subjects } from "../schema/Subjects.js"
import { LedgerError } from "../schema/LedgerError.js"
import { Nats } from "./Nats.js"
import { readOrderedRange, type RawMessage } from "./StreamRange.js"
import { archivedCommitDigest } from "./ArchivedHead.js"
import { forgetWritten, unverifiedWritten, type WrittenCommit } from "./WrittenCommits.js"
import { log } from "../observability/Log.js"

/** A checkpoint as stored: the record, its bytes and its stream sequence. */
export interface StoredCheckpoint {
  readonly checkpoint: Checkpoint
  readonly data: Uint8Array
  readonly seq: number
}

const eventsPrefix = Subjects.events("")
const checkpointSubject = Subjects.events(CheckpointSubject)

const fail = (operation: string) => (cause: unknown) => new LedgerError({ operation, message: cause instanceof Error ? cause.message : String(cause), cause })

/** The newest checkpoint in `WK_EVENTS`, or null when there is none. */
export const latestCheckpoint: Effect.Effect<StoredCheckpoint | null, LedgerError, Nats> = Effect.gen(function* () {
  const { jsm } = yield* Nats
  const m = yield* Effect.tryPromise({ try: () => jsm.streams.getMessage(Streams.events, { last_by_subj: checkpointSubject }), catch: fail("read the last checkpoint") })
  if (m === null) return null
  const decoded = decodeCheckpoint(m.data)
  if (Either.isLeft(decoded)) return yield* new LedgerError({ operation: "read the last checkpoint", message: `seq ${m.seq} on ${checkpointSubject} is not a checkpoint: ${decoded.left.message.slice(0, 200)}` })
  return { checkpoint: decoded.right, data: m.data, seq: m.seq }
})

/**
 * Writes the next checkpoint: reads `WK_EVENTS` from just after the range the last checkpoint
 * covered up to the stream's last sequence, signs the heads of every subject with a message in
 * that range, chains it to the last checkpoint, and stores it on `_checkpoint` only if that is still
 * the last one (expected last subject sequence), so kernels that checkpoint at once keep one chain.
 * Returns null when nothing was written since the last checkpoint, or when another kernel
 * stored the next one first.
 */
export const writeCheckpoint = (key: CommitKey, now: Date): Effect.Effect<StoredCheckpoint | null, LedgerError, Nats> =>
  Effect.gen(function* () {
    const nats = yield* Nats
    const { jsm, js, publish } = nats
    const last = yield* latestCheckpoint
    const info = yield* Effect.tryPromise({ try: () => jsm.streams.info(Streams.events), catch: fail("read WK_EVENTS") })
    const lastSeq = info.state.last_seq
    const fromSeq = last === null ? 1 : last.checkpoint.last_seq + 1
    const messages: Array<RawMessage> = []
    if (fromSeq <= lastSeq) yield* Effect.tryPromise({ try: () => readOrderedRange(js, Streams.events, { fromSeq }, lastSeq, (m) => void messages.push(m)), catch: fail("read WK_EVENTS for a checkpoint") })
    // This process's own commits up to here, each looked up as it stored it.
    const mine = unverifiedWritten().filter((c) => c.seq <= lastSeq)
    const missing = yield* Effect.tryPromise({ try: () => missingOf(nats, mine, messages), catch: fail("verify this kernel's commits") })
    if (missing.length === 0 && last !== null && lastSeq <= last.seq) {
      forgetWritten(mine.map((c) => c.seq))
      return null
    }
    const heads = headsOf(messages, (m) => (m.subject.startsWith(eventsPrefix) ? m.subject.slice(eventsPrefix.length) : undefined))
    const checkpoint = signCheckpoint({ prev: last === null ? "" : checkpointDigest(last.data), from_seq: fromSeq, last_seq: lastSeq, heads, missing, at: now.toISOString() }, key)
    const data = encodeCheckpoint(checkpoint)
    const stored = yield* Effect.tryPromise({
      try: () => publish(checkpointSubject, data, { msgID: `checkpoint-${lastSeq}`, lastSubjectSequence: last === null ? 0 : last.seq }),
      catch: (e) => e
    }).pipe(Effect.either)
    if (Either.isLeft(stored)) {
      // Another kernel stored a checkpoint since this one read the last: the chain stays one.
      if (typeof stored.left === "object" && stored.left !== null && "code" in stored.left && stored.left.code === 10071) return null
      return yield* fail("store a checkpoint")(stored.left)
    }
    if (stored.right.duplicate) return null
    forgetWritten(mine.map((c) => c.seq))
    if (missing.length > 0) log.error({ loop: "checkpointer", missing }, "commits this kernel stored are gone from WK_EVENTS or changed; the checkpoint names them")
    return { checkpoint, data, seq: stored.right.seq }
  })

/**
 * This process's commits that `WK_EVENTS` no longer holds as stored: looked up in the range just
 * read, else by sequence (a range another kernel checkpointed); one archived and purged counts as
 * held when its archive holds the same bytes.
 */
const missingOf = async (nats: Context.Tag.Service<typeof Nats>, mine: ReadonlyArray<WrittenCommit>, read: ReadonlyArray<RawMessage>): Promise<Array<CheckpointHead>> => {
  const bySeq = new Map(read.map((m) => [m.seq, m]))
  const out: Array<CheckpointHead> = []
  for (const c of mine) {
    const m = bySeq.get(c.seq) ?? (await nats.jsm.direct.getMessage(Streams.events, { seq: c.seq }).catch(() => null))
    if (m !== null && m.subject === Subjects.events(c.heldId) && checkpointDigest(m.data) === c.digest) continue
    if (m === null && (await archivedCommitDigest(nats.nc, nats.js, c.heldId, c.seq).catch(() => undefined)) === c.digest) continue
    out.push([c.heldId, c.seq, c.digest])
  }
  return out
}
