import { Effect } from "effect"
import { DeliverPolicy } from "@nats-io/jetstream"
import { Nats } from "../ledger/Nats.js"
import { auditError, AuditError } from "./AuditError.js"

/** One stored message: its stream sequence, subject, body and store time (ms). */
export interface RawMessage {
  readonly seq: number
  readonly subject: string
  readonly data: Uint8Array
  readonly time: number
}

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

/** Where to start reading. */
export type Start = { readonly fromSeq: number } | { readonly since: Date }

/** Position of a running read, for progress lines. */
export interface ReadProgress {
  readonly read: number
  readonly total: number
  readonly seq: number
  readonly elapsedMs: number
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
  Effect.gen(function* () {
    const { js } = yield* Nats
    if ("fromSeq" in start && start.fromSeq > untilSeq) return 0
    const consumer = yield* Effect.tryPromise({
      try: () =>
        js.consumers.get(
          stream,
          "fromSeq" in start
            ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: Math.max(1, start.fromSeq) }
            : { deliver_policy: DeliverPolicy.StartTime, opt_start_time: start.since.toISOString() }
        ),
      catch: auditError(`open an ordered consumer on ${stream}`)
    })
    const info = yield* Effect.tryPromise({ try: () => consumer.info(true), catch: auditError("read consumer info") })
    const total = info.num_pending
    if (total === 0) {
      yield* Effect.promise(() => consumer.delete().catch(() => false))
      return 0
    }
    return yield* Effect.tryPromise({
      try: async () => {
        const t0 = Date.now()
        let last = t0
        let read = 0
        // Callback mode: each message is handled inside the subscription's callback, with no
        // iterator queue and no promise per message (about 15% of a bare read's CPU).
        let finish!: (error?: unknown) => void
        const finished = new Promise<void>((resolve, reject) => (finish = (e) => (e === undefined ? resolve() : reject(e))))
        let done = false
        const messages = await consumer.consume({
          max_messages: 8192,
          callback: (m) => {
            if (done) return
            read++
            onMessage({ seq: m.seq, subject: m.subject, data: m.data, time: m.info.timestampNanos / 1e6 })
            if (onProgress !== undefined) {
              const now = Date.now()
              if (now - last >= progressEveryMs) {
                last = now
                onProgress({ read, total: Math.max(total, read + m.info.pending), seq: m.seq, elapsedMs: now - t0 })
              }
            }
            if (m.seq >= untilSeq || m.info.pending === 0) {
              done = true
              finish()
            }
          }
        })
        // A failure in onMessage stops the consumer with that error.
        void messages.closed().then((e) => finish(e ?? undefined), finish)
        try {
          await finished
        } finally {
          done = true
          await messages.close().catch(() => undefined)
          await consumer.delete().catch(() => false)
        }
        return read
      },
      catch: auditError(`read ${stream}`)
    })
  })

/**
 * Every message on one subject with `fromSeq <= seq < beforeSeq`, in order, through an ordered
 * consumer filtered on the subject (what read-only auditor credentials allow).
 */
export const readSubject = (stream: string, subject: string, fromSeq = 1, beforeSeq = Number.MAX_SAFE_INTEGER): Effect.Effect<ReadonlyArray<RawMessage>, AuditError, Nats> =>
  Effect.gen(function* () {
    const { js } = yield* Nats
    const consumer = yield* Effect.tryPromise({
      try: () => js.consumers.get(stream, { filter_subjects: subject, deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: Math.max(1, fromSeq) }),
      catch: auditError(`read ${subject} from ${stream}`)
    })
    const out: Array<RawMessage> = []
    if ((yield* Effect.tryPromise({ try: () => consumer.info(true), catch: auditError("read consumer info") })).num_pending === 0) {
      yield* Effect.promise(() => consumer.delete().catch(() => false))
      return out
    }
    return yield* Effect.tryPromise({
      try: async () => {
        const messages = await consumer.consume({ max_messages: 256 })
        try {
          for await (const m of messages) {
            if (m.seq >= beforeSeq) break
            out.push({ seq: m.seq, subject: m.subject, data: m.data, time: m.info.timestampNanos / 1e6 })
            if (m.info.pending === 0) break
          }
        } finally {
          await messages.close().catch(() => undefined)
          await consumer.delete().catch(() => false)
        }
        return out
      },
      catch: auditError(`read ${subject} from ${stream}`)
    })
  })
