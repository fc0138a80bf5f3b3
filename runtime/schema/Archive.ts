import { Schema } from "effect"

/** The object store bucket archives of ended held calls are written to. */
export const ArchiveBucket = "wk_archive"

/** The WK_EVENTS subject archive records are appended to (beside `_policy`). */
export const ArchiveSubject = "wk.v1.events._archive"

/** One archived held call: its id and the WK_EVENTS sequences of its events in the archive. */
export const ArchivedCall = Schema.Struct({
  held_id: Schema.String,
  seqs: Schema.Array(Schema.Int)
})
export type ArchivedCall = typeof ArchivedCall.Type

/**
 * `archive.written`: the events of `calls` were written, in stream order, to `object` in
 * `bucket`, compressed with `compression`; `sha256` is the lowercase hex SHA-256 of the stored
 * (compressed) bytes, `bytes` their length. Appended before the calls' events leave WK_EVENTS,
 * so every purged sequence is named by a record and its digest.
 *
 * The object, once decompressed, is JSON lines, one per event in sequence order:
 * `{"seq":<WK_EVENTS sequence>,"subject":"wk.v1.events.<held_id>","event":<the stored event, byte for byte>}`.
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
  by: Schema.String
})
export type ArchiveRecord = typeof ArchiveRecord.Type

/** One line of an archive object, as parsed (the event stays raw JSON text for the auditor to decode). */
export interface ArchiveLine {
  readonly seq: number
  readonly subject: string
  readonly event: Uint8Array
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** The JSON lines of an archive: the stored event bytes are embedded as they are (they are JSON). */
export const encodeArchiveLines = (lines: ReadonlyArray<ArchiveLine>): Uint8Array =>
  encoder.encode(lines.map((l) => `{"seq":${l.seq},"subject":${JSON.stringify(l.subject)},"event":${decoder.decode(l.event)}}\n`).join(""))

/**
 * Parses archive JSON lines back into their events, each event's bytes exactly as archived (the
 * text between `"event":` and the line's closing brace). Throws on a malformed line.
 */
export const decodeArchiveLines = (bytes: Uint8Array): Array<ArchiveLine> => {
  const out: Array<ArchiveLine> = []
  const text = decoder.decode(bytes)
  let n = 0
  for (const line of text.split("\n")) {
    n++
    if (line.length === 0) continue
    const m = /^\{"seq":(\d+),"subject":("(?:[^"\\]|\\.)*"),"event":(.*)\}$/.exec(line)
    if (m === null) throw new Error(`archive line ${n} is not {"seq","subject","event"}`)
    out.push({ seq: Number(m[1]), subject: JSON.parse(m[2]!) as string, event: encoder.encode(m[3]!) })
  }
  return out
}
