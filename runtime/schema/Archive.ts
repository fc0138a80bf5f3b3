import { Schema } from "effect"
import { canonicalize } from "./Canonical.js"
import type { CommitKey } from "./Commit.js"
import { ed25519Sign, ed25519Verify } from "./Ed25519.js"

/** The object store bucket archives of ended held calls are written to. */
export const ArchiveBucket = "wk_archive"

/** The WK_EVENTS subject archive records are appended to (beside `_policy`). */
export const ArchiveSubject = "wk.v1.events._archive"

/** One archived held call: its id and the WK_EVENTS sequences of its commits in the archive. */
export const ArchivedCall = Schema.Struct({
  held_id: Schema.String,
  seqs: Schema.Array(Schema.Int)
})
export type ArchivedCall = typeof ArchivedCall.Type

/**
 * `archive.written`: the commits of `calls` were written, in stream order, to `object` in
 * `bucket`, compressed with `compression`; `sha256` is the lowercase hex SHA-256 of the stored
 * (compressed) bytes, `bytes` their length, `events` how many events the commits hold. Appended
 * before the calls' commits leave WK_EVENTS, so every purged sequence is named by a record and
 * its digest.
 *
 * The object, once decompressed, is JSON lines, one per commit (one stored message) in sequence
 * order: `{"seq":<WK_EVENTS sequence>,"subject":"wk.v1.events.<held_id>","commit":<the stored
 * commit, byte for byte>}`. An archived event keeps its address: the line's `seq` and its index
 * in the commit's `events`. Commits are archived whole, not split into events, so the archived
 * bytes are the stored bytes and anything that covers a commit (a digest, a signature) still
 * verifies from the archive.
 *
 * The record is what authorizes the purge that follows it: a kernel with a signing key signs it
 * (`key`, `sig`: ed25519 over the JCS of the record without `sig`), and the next checkpoint covers
 * it; an auditor holding the kernel's keys counts a purged sequence as archived only under a
 * record one of them signed.
 */
export const ArchiveRecord = Schema.Struct({
  type: Schema.Literal("archive.written"),
  archive_id: Schema.String,
  bucket: Schema.String,
  object: Schema.String,
  compression: Schema.Literal("gzip"),
  sha256: Schema.String,
  bytes: Schema.Int,
  events: Schema.Int,
  calls: Schema.Array(ArchivedCall),
  at: Schema.String,
  by: Schema.String,
  key: Schema.optional(Schema.String),
  sig: Schema.optional(Schema.String)
})
export type ArchiveRecord = typeof ArchiveRecord.Type

/** What an archive record's signature covers: the JCS of the record without `sig`. */
const archiveSigningBytes = (r: ArchiveRecord): Uint8Array => {
  const { sig: _, ...rest } = r
  return Buffer.from(canonicalize(rest))
}

/** The record signed with the kernel's key. */
export const signArchiveRecord = (r: Omit<ArchiveRecord, "key" | "sig">, key: CommitKey): ArchiveRecord => {
  const unsigned = { ...r, key: key.publicKey }
  return { ...unsigned, sig: Buffer.from(ed25519Sign(archiveSigningBytes(unsigned), key.secretKey)).toString("base64") }
}

/** Whether a record carries a signature and it verifies under its `key`. */
export const archiveRecordSigned = (r: ArchiveRecord): boolean =>
  r.key !== undefined && r.sig !== undefined && ed25519Verify(archiveSigningBytes(r), Buffer.from(r.sig, "base64"), Buffer.from(r.key, "base64"))

/** One line of an archive object, as parsed (the commit stays raw JSON text for the auditor to decode). */
export interface ArchiveLine {
  readonly seq: number
  readonly subject: string
  readonly commit: Uint8Array
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** The JSON lines of an archive: the stored commit bytes are embedded as they are (they are JSON). */
export const encodeArchiveLines = (lines: ReadonlyArray<ArchiveLine>): Uint8Array =>
  encoder.encode(lines.map((l) => `{"seq":${l.seq},"subject":${JSON.stringify(l.subject)},"commit":${decoder.decode(l.commit)}}\n`).join(""))

/**
 * Parses archive JSON lines back into their commits, each commit's bytes exactly as archived (the
 * text between `"commit":` and the line's closing brace). Throws on a malformed line.
 */
export const decodeArchiveLines = (bytes: Uint8Array): Array<ArchiveLine> => {
  const out: Array<ArchiveLine> = []
  const text = decoder.decode(bytes)
  let n = 0
  for (const line of text.split("\n")) {
    n++
    if (line.length === 0) continue
    const m = /^\{"seq":(\d+),"subject":("(?:[^"\\]|\\.)*"),"commit":(.*)\}$/.exec(line)
    if (m === null) throw new Error(`archive line ${n} is not {"seq","subject","commit"}`)
    out.push({ seq: Number(m[1]), subject: JSON.parse(m[2]!) as string, commit: encoder.encode(m[3]!) })
  }
  return out
}
