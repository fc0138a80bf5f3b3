import { Effect } from "effect"
import type { LedgerReader } from "../../ledger/LedgerReader.js"
import { CheckpointSubject } from "../../schema/Checkpoint.js"
import { KeyRotationSubject } from "../../schema/KeyRotation.js"
import { readArchives, type ArchivedEvents } from "../Archives.js"
import { AuditError } from "../AuditError.js"
import type { Violation } from "../AuditReport.js"
import type { HistoryMessage } from "../checks/Checkpoints.js"
import { readDeliveries, type Deliveries } from "../Deliveries.js"
import type { SignatureVerifier } from "../internal/SignatureVerifier.js"
import { readOrdered, readSubject, type RawMessage } from "../StreamReader.js"
import type { ReplayPlan } from "./Plan.js"

/** The raw messages of one held call as read, and the seqs of those sent to the verifier. */
export interface CallLog {
  readonly heldId: string
  readonly messages: Array<RawMessage>
  readonly signed: Array<number>
}

/** Everything a replay read: the calls' commits as bytes, the records, checkpoints and deliveries. */
export interface Collected {
  /** Per held call, its commits (stream and archives) in sequence order, in first-seen order. */
  readonly calls: ReadonlyMap<string, CallLog>
  readonly archived: ArchivedEvents
  /** Checkpoints read in the range. */
  readonly checkpoints: ReadonlyArray<RawMessage>
  /** Records (`_policy`, `_archive`, `_keys`, standing grants) read in the range. */
  readonly records: ReadonlyArray<HistoryMessage>
  /** Key rotation records read in the range. */
  readonly rotations: ReadonlyArray<RawMessage>
  /** The server's store time of each call commit read from the stream. */
  readonly storeTimes: ReadonlyMap<number, number>
  readonly events: number
  readonly backfilled: number
  readonly archivedCommits: number
  readonly firstSeq: number
  readonly lastSeq: number
  /** `stream` violations of the read itself: gaps and deletions no archive explains. */
  readonly streamViolations: ReadonlyArray<Violation>
  /** `archive` violations: archives that do not verify, sequences that differ from the stream. */
  readonly archiveViolations: ReadonlyArray<Violation>
  readonly deliveries: Deliveries
}

const EnvelopeKey = Buffer.from('"envelope"')
// Buffer's native search works on any Uint8Array: no Buffer view per message.
const indexOf = Buffer.prototype.indexOf as (this: Uint8Array, value: Uint8Array) => number

/** Sequences in [from, to) that no archive record names (at most 100). */
export const unarchivedIn = (seqs: ReadonlySet<number>, from: number, to: number): Array<number> => {
  const out: Array<number> = []
  for (let q = from; q < to && out.length < 100; q++) if (!seqs.has(q)) out.push(q)
  return out
}

/**
 * Stage 2: reads the selected range of the stream in order, the earlier commits of the calls it
 * touched, the archived commits of those calls and their deliveries. Messages are kept as bytes;
 * every commit carrying an envelope is handed to the verifier as it is read.
 */
export const collect = (plan: ReplayPlan, verifier: SignatureVerifier): Effect.Effect<Collected, AuditError, LedgerReader> =>
  Effect.gen(function* () {
    const { stream, selection, layout } = plan
    const streamViolations: Array<Violation> = []
    const fail = (held_id: string, seqs: ReadonlyArray<number>, message: string) => void streamViolations.push({ check: "stream", held_id, seqs: [...seqs], message })
    // Archived calls' events were purged from the stream: the gaps they leave are accounted for
    // by the archive records (and each archive is verified against its digest).
    const archived = yield* readArchives(stream, layout.prefix, "held" in selection ? selection.held : undefined)
    const archiveViolations: Array<Violation> = [...archived.violations]
    let hotArchived = 0
    const unarchived = (from: number, to: number) => unarchivedIn(archived.seqs, from, to)

    const calls = new Map<string, CallLog>()
    const submit = (log: CallLog, m: RawMessage) => {
      // A body without these bytes has no envelope key, short of a JSON escape in the key: such an
      // envelope gets no verdict here and the signatures check verifies it on the main thread.
      if (indexOf.call(m.data, EnvelopeKey) < 0) return
      verifier.submit(m.seq, m.data)
      log.signed.push(m.seq)
    }
    const checkpoints: Array<RawMessage> = []
    const records: Array<HistoryMessage> = []
    const rotations: Array<RawMessage> = []
    const storeTimes = new Map<number, number>()
    let events = 0
    let prevSeq = 0
    let firstSeq = 0
    let lastSeq = 0
    const take = (m: RawMessage, contiguous: boolean) => {
      events++
      if (firstSeq === 0) firstSeq = m.seq
      lastSeq = m.seq
      if (contiguous && prevSeq !== 0 && m.seq !== prevSeq + 1) {
        const missing = unarchived(prevSeq + 1, m.seq)
        if (missing.length > 0) fail("", missing, `sequences ${prevSeq + 1}..${m.seq - 1} are missing from ${stream} (not archived: ${missing.length > 99 ? "100 or more" : missing.length})`)
      }
      if (archived.seqs.has(m.seq)) hotArchived++
      prevSeq = m.seq
      const heldId = m.subject.startsWith(layout.prefix) ? m.subject.slice(layout.prefix.length) : m.subject
      if (heldId === CheckpointSubject) return void checkpoints.push(m)
      // Records (`_policy`, `_archive`, `_keys`): not calls, but covered by the checkpoints' heads.
      if (heldId.startsWith("_")) {
        records.push({ name: heldId, seq: m.seq, data: m.data })
        if (heldId === KeyRotationSubject) rotations.push(m)
        return
      }
      let log = calls.get(heldId)
      if (log === undefined) calls.set(heldId, (log = { heldId, messages: [], signed: [] }))
      log.messages.push(m)
      if (m.time > 0) storeTimes.set(m.seq, m.time)
      submit(log, m)
    }

    const progress = plan.options.onProgress
    if ("held" in selection) {
      for (const m of yield* readSubject(stream, `${layout.prefix}${selection.held}`)) take(m, false)
    } else {
      const start = "fromSeq" in selection ? { fromSeq: Math.max(selection.fromSeq, layout.firstSeq) } : { since: selection.since }
      yield* readOrdered(stream, start, layout.lastSeq, (m) => take(m, true), progress && ((p) => progress({ ...p, phase: "events" })))
      if ("fromSeq" in selection && selection.fromSeq < layout.firstSeq && unarchived(Math.max(1, selection.fromSeq), layout.firstSeq).length > 0) fail("", [], `the selection starts at ${selection.fromSeq}, but ${stream} begins at ${layout.firstSeq} (earlier messages were purged)`)
    }
    verifier.flush()
    if ("held" in selection && calls.size === 0 && !archived.byHeld.has(selection.held)) {
      return yield* new AuditError({ operation: "select", message: `no such held call: ${selection.held} has no events in ${stream} or its archives` })
    }

    // Calls the range touched are folded from their first event.
    let backfilled = 0
    if (firstSeq > layout.firstSeq && !("held" in selection)) {
      yield* Effect.forEach(
        [...calls.values()],
        (log) =>
          Effect.map(readSubject(stream, `${layout.prefix}${log.heldId}`, 1, firstSeq), (earlier) => {
            if (earlier.length === 0) return
            backfilled += earlier.length
            for (const m of earlier) {
              if (m.time > 0) storeTimes.set(m.seq, m.time)
              submit(log, m)
            }
            log.messages.unshift(...earlier)
          }),
        { concurrency: 16, discard: true }
      )
      verifier.flush()
    }

    // Archived events of the selected calls (all of them for a read from the start) join the
    // stream's, in sequence order; a sequence in both must be the same bytes.
    let archivedCommits = 0
    const fromStart = "fromSeq" in selection ? selection.fromSeq : Number.POSITIVE_INFINITY
    for (const [heldId, msgs] of archived.byHeld) {
      const selected = "held" in selection ? heldId === selection.held : calls.has(heldId) || msgs.some((m) => m.seq >= fromStart)
      if (!selected) continue
      let log = calls.get(heldId)
      if (log === undefined) calls.set(heldId, (log = { heldId, messages: [], signed: [] }))
      const bySeq = new Map(log.messages.map((m) => [m.seq, m]))
      for (const m of msgs) {
        const hot = bySeq.get(m.seq)
        if (hot === undefined) {
          bySeq.set(m.seq, m)
          submit(log, m)
          archivedCommits++
        } else if (Buffer.compare(Buffer.from(hot.data), Buffer.from(m.data)) !== 0) {
          archiveViolations.push({ check: "archive", held_id: heldId, seqs: [m.seq], message: `seq ${m.seq} differs between ${stream} and its archive` })
        }
      }
      log.messages.splice(0, log.messages.length, ...[...bySeq.values()].sort((a, b) => a.seq - b.seq))
    }
    verifier.flush()
    const explained = [...archived.seqs].filter((q) => q >= layout.firstSeq && q <= layout.lastSeq).length - hotArchived
    if (layout.deleted > explained) fail("", [], `${layout.deleted - explained} message(s) were deleted from ${stream} (${Math.max(0, explained)} more left it archived)`)

    const deliveries: Deliveries = plan.sessions === null ? { _tag: "skipped", note: "sessions stream not read (disabled)" } : yield* readDeliveries(plan.sessions, calls)
    return { calls, archived, checkpoints, records, rotations, storeTimes, events, backfilled, archivedCommits, firstSeq, lastSeq, streamViolations, archiveViolations, deliveries }
  })
