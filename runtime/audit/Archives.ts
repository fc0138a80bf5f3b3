import { Effect, Either, Schema } from "effect"
import { gunzipSync } from "node:zlib"
import type { LedgerReader } from "../ledger/LedgerReader.js"
import { openObjectReader, type ObjectReader } from "../ledger/ObjectReader.js"
import { ArchiveRecord, archiveRecordSigned, decodeArchiveLines } from "../schema/Archive.js"
import { sha256Hex } from "../schema/Canonical.js"
import type { Violation } from "./AuditReport.js"
import type { RawMessage } from "./StreamReader.js"
import { readSubject } from "./StreamReader.js"

const decodeRecord = Schema.decodeUnknownEither(Schema.parseJson(ArchiveRecord))
const text = new TextDecoder()

/** What the archives named by a stream's `_archive` records hold, as far as they verify. */
export interface ArchivedEvents {
  /** Archived commits by held id, each as the message it was in the stream (time unknown: 0). */
  readonly byHeld: ReadonlyMap<string, ReadonlyArray<RawMessage>>
  /** Every sequence some record says was archived (verified or not): gaps the stream may have. */
  readonly seqs: ReadonlySet<number>
  readonly records: number
  /** How many distinct commits the verified archives hold. */
  readonly commits: number
  /** Each record's stream sequence and the key that signed it (undefined: unsigned). */
  readonly signers: ReadonlyArray<{ readonly seq: number; readonly key: string | undefined }>
  readonly violations: ReadonlyArray<Violation>
}

/**
 * Reads every `archive.written` record on `<prefix>_archive`, fetches each archive object,
 * checks its SHA-256 against the record, decompresses it and checks that it holds exactly the
 * sequences and subjects the record lists. An archive that is missing, altered or inconsistent
 * is a violation of the `archive` check naming the object and each call it holds; its commits
 * are then not used. With `only`, just the archives holding that held call are fetched.
 */
export const readArchives = (stream: string, prefix: string, only?: string): Effect.Effect<ArchivedEvents, never, LedgerReader> =>
  Effect.gen(function* () {
    const violations: Array<Violation> = []
    const byHeld = new Map<string, Map<number, RawMessage>>()
    const seqs = new Set<number>()
    let commits = 0
    const recordsRead = yield* Effect.either(readSubject(stream, `${prefix}_archive`))
    if (Either.isLeft(recordsRead)) {
      violations.push({ check: "archive", held_id: "", seqs: [], message: `cannot read the archive records of ${stream}: ${recordsRead.left.message}` })
      return { byHeld: new Map(), seqs, records: 0, commits: 0, signers: [], violations }
    }
    const records: Array<ArchiveRecord & { seq: number }> = []
    const signers: Array<{ seq: number; key: string | undefined }> = []
    for (const m of recordsRead.right) {
      const r = decodeRecord(text.decode(m.data))
      if (Either.isLeft(r)) {
        violations.push({ check: "archive", held_id: "_archive", seqs: [m.seq], message: `an archive record does not decode: ${r.left.message.slice(0, 200)}` })
        continue
      }
      // A signature that does not verify authorizes nothing: the sequences it names stay unexplained.
      if ((r.right.sig !== undefined || r.right.key !== undefined) && !archiveRecordSigned(r.right)) {
        violations.push({ check: "archive", held_id: "_archive", seqs: [m.seq], message: `archive record seq ${m.seq}'s signature does not verify under its key: it authorizes no purge` })
        continue
      }
      records.push({ ...r.right, seq: m.seq })
      signers.push({ seq: m.seq, key: r.right.key })
    }
    for (const r of records) for (const c of r.calls) for (const s of c.seqs) seqs.add(s)
    const stores = new Map<string, ObjectReader | string>()
    const open = (bucket: string) =>
      Effect.gen(function* () {
        const hit = stores.get(bucket)
        if (hit !== undefined) return hit
        const os = yield* Effect.either(openObjectReader(bucket))
        const v = Either.isRight(os) ? os.right : os.left.message
        stores.set(bucket, v)
        return v
      })
    for (const r of records) {
      if (only !== undefined && !r.calls.some((c) => c.held_id === only)) continue
      const name = `${r.bucket}/${r.object}`
      const bad = (message: string) => {
        for (const c of r.calls) violations.push({ check: "archive", held_id: c.held_id, seqs: [r.seq], message: `archive ${name} (${r.archive_id}): ${message}` })
      }
      const os = yield* open(r.bucket)
      if (typeof os === "string") {
        bad(`cannot be read: ${os}`)
        continue
      }
      const bytes = yield* Effect.either(os.get(r.object))
      if (Either.isLeft(bytes)) {
        bad(`cannot be read: ${bytes.left.message}`)
        continue
      }
      if (bytes.right === null) {
        bad("is missing from the object store")
        continue
      }
      const actual = sha256Hex(bytes.right)
      if (actual !== r.sha256) {
        bad(`its bytes have SHA-256 ${actual}, but the archive record says ${r.sha256}`)
        continue
      }
      let lines
      try {
        lines = decodeArchiveLines(gunzipSync(bytes.right))
      } catch (e) {
        bad(`does not decompress to archive lines: ${String(e).slice(0, 200)}`)
        continue
      }
      const expected = new Map<number, string>()
      for (const c of r.calls) for (const s of c.seqs) expected.set(s, c.held_id)
      const mismatch = lines.find((l) => expected.get(l.seq) === undefined || l.subject !== `${prefix}${expected.get(l.seq)}`)
      if (mismatch !== undefined || lines.length !== expected.size) {
        bad(mismatch !== undefined ? `holds seq ${mismatch.seq} on ${mismatch.subject}, which its record does not list` : `holds ${lines.length} commits, its record lists ${expected.size}`)
        continue
      }
      for (const l of lines) {
        const heldId = expected.get(l.seq)!
        let calls = byHeld.get(heldId)
        if (calls === undefined) byHeld.set(heldId, (calls = new Map()))
        const prev = calls.get(l.seq)
        if (prev !== undefined && Buffer.compare(Buffer.from(prev.data), Buffer.from(l.commit)) !== 0) {
          violations.push({ check: "archive", held_id: heldId, seqs: [l.seq], message: `seq ${l.seq} differs between archive ${name} and an earlier archive of it` })
          continue
        }
        if (prev === undefined) commits++
        calls.set(l.seq, { seq: l.seq, subject: l.subject, data: l.commit, time: 0 })
      }
    }
    const out = new Map<string, ReadonlyArray<RawMessage>>()
    for (const [heldId, m] of byHeld) out.set(heldId, [...m.values()].sort((a, b) => a.seq - b.seq))
    return { byHeld: out, seqs, records: records.length, commits, signers, violations }
  })
