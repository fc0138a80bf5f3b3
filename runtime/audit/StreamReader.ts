import { Effect } from "effect"
import { Nats } from "../ledger/Nats.js"
import { readOrderedRange, readSubjectRange, type RawMessage, type ReadProgress, type Start } from "../ledger/StreamRange.js"
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
export const streamLayout = (stream: string): Effect.Effect<StreamLayout, AuditError, Nats> =>
  Effect.gen(function* () {
    const { jsm } = yield* Nats
    const info = yield* Effect.tryPromise({ try: () => jsm.streams.info(stream), catch: auditError(`read stream ${stream}`) })
    const subject = info.config.subjects?.[0] ?? ""
    if (!subject.endsWith(".>")) return yield* new AuditError({ operation: "read stream", message: `stream ${stream} has subjects ${JSON.stringify(info.config.subjects)}; expected one '<prefix>.>' subject` })
    return {
      stream,
      prefix: subject.slice(0, -1),
      firstSeq: info.state.first_seq,
      lastSeq: info.state.last_seq,
      messages: info.state.messages,
      deleted: info.state.num_deleted ?? 0
    }
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
): Effect.Effect<number, AuditError, Nats> =>
  Effect.flatMap(Nats, ({ js }) =>
    Effect.tryPromise({ try: () => readOrderedRange(js, stream, start, untilSeq, onMessage, onProgress, progressEveryMs), catch: auditError(`read ${stream}`) })
  )

/**
 * Every message on one subject with `fromSeq <= seq < beforeSeq`, in order, through an ordered
 * consumer filtered on the subject (what read-only auditor credentials allow).
 */
export const readSubject = (stream: string, subject: string, fromSeq = 1, beforeSeq = Number.MAX_SAFE_INTEGER): Effect.Effect<ReadonlyArray<RawMessage>, AuditError, Nats> =>
  Effect.flatMap(Nats, ({ js }) => Effect.tryPromise({ try: () => readSubjectRange(js, stream, subject, fromSeq, beforeSeq), catch: auditError(`read ${subject} from ${stream}`) }))
