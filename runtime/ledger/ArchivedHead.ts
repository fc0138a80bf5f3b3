import { Either, Schema } from "effect"
import { gunzipSync } from "node:zlib"
import { Objm } from "@nats-io/obj"
import type { NatsConnection } from "@nats-io/transport-node"
import type { JetStreamClient } from "@nats-io/jetstream"
import { ArchiveRecord, ArchiveSubject, decodeArchiveLines } from "../schema/Archive.js"
import { sha256Hex } from "../schema/Canonical.js"
import { commitDigest } from "../schema/Commit.js"
import { Streams } from "../schema/Subjects.js"
import { readSubjectRange } from "./StreamRange.js"

const decodeRecord = Schema.decodeUnknownEither(Schema.parseJson(ArchiveRecord))

/**
 * The digest of a call's commit at `seq` that archiving purged from `WK_EVENTS`, read from the
 * archive whose record lists it (its bytes checked against the record's SHA-256); undefined when
 * no archive holds it. Rare: only a commit appended to a call after its history was archived,
 * by a kernel that no longer caches the call, reads it, so its `prev` still names its predecessor.
 */
export const archivedCommitDigest = async (nc: NatsConnection, js: JetStreamClient, heldId: string, seq: number): Promise<string | undefined> => {
  const records = await readSubjectRange(js, Streams.events, ArchiveSubject)
  for (const m of records.reverse()) {
    const r = decodeRecord(new TextDecoder().decode(m.data))
    if (Either.isLeft(r) || !r.right.calls.some((c) => c.held_id === heldId && c.seqs.includes(seq))) continue
    const os = await new Objm(nc).open(r.right.bucket)
    const bytes = await os.getBlob(r.right.object)
    if (bytes === null || sha256Hex(bytes) !== r.right.sha256) continue
    const line = decodeArchiveLines(gunzipSync(bytes)).find((l) => l.seq === seq)
    if (line !== undefined) return commitDigest(line.commit)
  }
  return undefined
}
