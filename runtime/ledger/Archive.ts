import { Effect } from "effect"
import { gzipSync } from "node:zlib"
import { randomBytes } from "node:crypto"
import { DeliverPolicy } from "@nats-io/jetstream"
import { Objm } from "@nats-io/obj"
import { quiescent } from "../heldcall/Facts.js"
import { reduce } from "../heldcall/Reducer.js"
import { ArchiveBucket, ArchiveSubject, encodeArchiveLines, signArchiveRecord, type ArchiveLine, type ArchiveRecord } from "../schema/Archive.js"
import { sha256Hex } from "../schema/Canonical.js"
import type { HeldCallFacts } from "../schema/Facts.js"
import { Streams, Subjects } from "../schema/Subjects.js"
import { decodeCommitBytes, sequencedEvents, type Commit, type CommitKey } from "../schema/Commit.js"
import { LedgerError } from "../schema/LedgerError.js"
import { Nats } from "./Nats.js"

const EventsPrefix = "wk.v1.events."

interface StoredCommit extends ArchiveLine {
  readonly time: number
}

/** Every stored commit of one held call, in order (direct get, next by subject). */
const readCall = (heldId: string) =>
  Effect.gen(function* () {
    const { jsm } = yield* Nats
    return yield* Effect.tryPromise({
      try: async () => {
        const out: Array<StoredCommit> = []
        let seq = 1
        for (;;) {
          const m = await jsm.direct.getMessage(Streams.events, { next_by_subj: Subjects.events(heldId), seq })
          if (m === null) return out
          out.push({ seq: m.seq, subject: m.subject, commit: m.data, time: m.timestamp === undefined ? 0 : Date.parse(m.timestamp) })
          seq = m.seq + 1
        }
      },
      catch: (cause) => new LedgerError({ operation: `read events of ${heldId}`, message: String(cause), cause })
    })
  })

/**
 * Held ids seen in `WK_EVENTS` from `fromSeq` on, among messages stored before `cutoff` (ms),
 * at most `limit` distinct ids, and the sequence to continue from next time (0: the scan reached
 * messages newer than the cutoff or the end of the stream; start over from the first).
 */
export const scanOldCalls = (fromSeq: number, cutoff: number, limit: number) =>
  Effect.gen(function* () {
    const { js, jsm } = yield* Nats
    return yield* Effect.tryPromise({
      try: async () => {
        const info = await jsm.streams.info(Streams.events)
        const ids = new Set<string>()
        const start = Math.max(fromSeq, info.state.first_seq)
        if (info.state.messages === 0 || start > info.state.last_seq) return { ids: [] as Array<string>, next: 0 }
        const consumer = await js.consumers.get(Streams.events, { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: start })
        let next = 0
        try {
          const messages = await consumer.fetch({ max_messages: Math.min(10_000, limit * 20), expires: 2_000 })
          for await (const m of messages) {
            if (m.info.timestampNanos / 1e6 >= cutoff) {
              next = 0
              break
            }
            const id = m.subject.slice(EventsPrefix.length)
            if (!id.startsWith("_")) ids.add(id)
            next = m.info.pending === 0 ? 0 : m.seq + 1
            if (ids.size >= limit || m.info.pending === 0) break
          }
        } finally {
          await consumer.delete().catch(() => false)
        }
        return { ids: [...ids], next }
      },
      catch: (cause) => new LedgerError({ operation: "scan WK_EVENTS for old calls", message: String(cause), cause })
    })
  })

/**
 * Archives held calls that are quiescent and whose last commit was stored before `cutoff`: their
 * commits go, gzip-compressed JSON lines, to one object in `wk_archive`; an `archive.written`
 * record with the object's SHA-256 is appended to `WK_EVENTS`; then each call's commits up to
 * the last archived one are purged from `WK_EVENTS` (a commit appended meanwhile stays). A
 * crash between the record and the purge leaves the commits in both places; the next pass
 * archives them again, and the auditor takes each sequence once (the copies must agree). With
 * `key` (the kernel's signing key) the record is signed: an auditor then holds the purge to it.
 * The purge needs the retention login (nats.conf): the kernel's own may not purge `WK_EVENTS`.
 */
export const archiveCalls = (heldIds: ReadonlyArray<string>, cutoff: number, by: string, key?: CommitKey) =>
  Effect.gen(function* () {
    const { nc, publish, jsm } = yield* Nats
    const chosen: Array<{ heldId: string; commits: ReadonlyArray<StoredCommit>; events: number }> = []
    for (const heldId of heldIds) {
      const commits = yield* readCall(heldId)
      const last = commits[commits.length - 1]
      if (last === undefined || last.time >= cutoff) continue
      let decoded: Array<Commit>
      try {
        decoded = commits.map((c) => decodeCommitBytes(c.commit))
      } catch {
        // A commit the kernel cannot decode stays where the auditor reports it.
        continue
      }
      const facts: HeldCallFacts = reduce(heldId, decoded.flatMap((c, i) => sequencedEvents(commits[i]!.seq, c)))
      if (quiescent(facts)) chosen.push({ heldId, commits, events: decoded.reduce((n, c) => n + c.events.length, 0) })
    }
    if (chosen.length === 0) return null
    const lines = chosen.flatMap((c) => c.commits).sort((a, b) => a.seq - b.seq)
    const stored = gzipSync(encodeArchiveLines(lines))
    const archiveId = `a_${lines[0]!.seq}_${Date.now().toString(36)}_${randomBytes(3).toString("hex")}`
    const body: ArchiveRecord = {
      type: "archive.written",
      archive_id: archiveId,
      bucket: ArchiveBucket,
      object: `events/${archiveId}.jsonl.gz`,
      compression: "gzip",
      sha256: sha256Hex(stored),
      bytes: stored.length,
      events: chosen.reduce((n, c) => n + c.events, 0),
      calls: chosen.map((c) => ({ held_id: c.heldId, seqs: c.commits.map((e) => e.seq) })),
      at: new Date().toISOString(),
      by
    }
    const record = key === undefined ? body : signArchiveRecord(body, key)
    yield* Effect.tryPromise({
      try: async () => {
        const os = await new Objm(nc).open(ArchiveBucket)
        await os.putBlob({ name: record.object }, stored)
      },
      catch: (cause) => new LedgerError({ operation: `write archive ${record.object}`, message: String(cause), cause })
    })
    yield* Effect.tryPromise({
      try: () => publish(ArchiveSubject, new TextEncoder().encode(JSON.stringify(record)), { msgID: archiveId }),
      catch: (cause) => new LedgerError({ operation: `record archive ${archiveId}`, message: String(cause), cause })
    })
    for (const c of chosen) {
      const upTo = c.commits[c.commits.length - 1]!.seq
      yield* Effect.tryPromise({
        try: () => jsm.streams.purge(Streams.events, { filter: Subjects.events(c.heldId), seq: upTo + 1 }),
        catch: (cause) => new LedgerError({ operation: `purge archived events of ${c.heldId}`, message: String(cause), cause })
      })
    }
    return record
  })
