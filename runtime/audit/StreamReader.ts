import { Effect } from "effect"
import { LedgerReader } from "../ledger/LedgerReader.js"
import type { RawMessage, ReadProgress, Start } from "../ledger/StreamRange.js"
import { auditError, AuditError } from "./AuditError.js"

export type { RawMessage, ReadProgress, Start } from "../ledger/StreamRange.js"

/** A stream as the auditor sees it before reading: its event subject prefix and bounds. */
export interface StreamLayout {
  readonly stream: string
  /** The subjects' common prefix, for example `wk.v1.events.`; a held id is what follows. */
  readonly prefix: string
  readonly firstSeq: number
  readonly lastSeq: number
  readonly messages: number
  readonly deleted: number
}

/** Reads the stream's configuration and state. */
export const streamLayout = (stream: string): Effect.Effect<StreamLayout, AuditError, LedgerReader> =>
  Effect.gen(function* () {
    const reader = yield* LedgerReader
    const state = yield* Effect.tryPromise({ try: () => reader.streamState(stream), catch: auditError(`read stream ${stream}`) })
    const subject = state.subjects[0] ?? ""
    if (!subject.endsWith(".>")) return yield* new AuditError({ operation: "read stream", message: `stream ${stream} has subjects ${JSON.stringify(state.subjects)}; expected one '<prefix>.>' subject` })
    return { stream, prefix: subject.slice(0, -1), firstSeq: state.firstSeq, lastSeq: state.lastSeq, messages: state.messages, deleted: state.deleted }
  })

/**
 * Reads the stream in order with an ordered consumer, from a sequence or a time, up to the last
 * sequence it held when the read began (`untilSeq`), calling `onMessage` for each message and
 * `onProgress` at most every `progressEveryMs`. Returns how many messages were read.
 */
export const readOrdered = (
  stream: string,
  start: Start,
  untilSeq: number,
  onMessage: (m: RawMessage) => void,
  onProgress?: (p: ReadProgress) => void,
  progressEveryMs = 1000
): Effect.Effect<number, AuditError, LedgerReader> =>
  Effect.flatMap(LedgerReader, (reader) =>
    Effect.tryPromise({ try: () => reader.readOrdered(stream, start, untilSeq, onMessage, onProgress, progressEveryMs), catch: auditError(`read ${stream}`) })
  )

/**
 * Every message on one subject with `fromSeq <= seq < beforeSeq`, in order, through an ordered
 * consumer filtered on the subject (what read-only auditor credentials allow).
 */
export const readSubject = (stream: string, subject: string, fromSeq = 1, beforeSeq = Number.MAX_SAFE_INTEGER): Effect.Effect<ReadonlyArray<RawMessage>, AuditError, LedgerReader> =>
  Effect.flatMap(LedgerReader, (reader) => Effect.tryPromise({ try: () => reader.readSubject(stream, subject, fromSeq, beforeSeq), catch: auditError(`read ${subject} from ${stream}`) }))
