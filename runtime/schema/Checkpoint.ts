import { Schema } from "effect"
import { canonicalize, sha256Hex } from "./Canonical.js"
import type { CommitKey } from "./Commit.js"
import { ed25519Sign, ed25519Verify } from "./Ed25519.js"

/**
 * Where a subject of the events stream stood at a checkpoint: its name after the stream's
 * prefix (a held id, `_policy`, `_archive`), the sequence of its last message at or before the
 * checkpoint's `last_seq`, and the sha256 (hex) of that message's stored bytes.
 */
export const CheckpointHead = Schema.Tuple(Schema.String, Schema.Number, Schema.String)
export type CheckpointHead = typeof CheckpointHead.Type

/**
 * A signed checkpoint, stored on `wk.v1.events._checkpoint` in `WK_EVENTS`. It covers the
 * stream sequences `from_seq..last_seq` (the first checkpoint from 1, each next one from where
 * the one before ended): `heads` lists every subject with a message in that range, with its last
 * message in it. `prev` is the sha256 of the previous checkpoint's stored bytes ("" for the first),
 * so checkpoints form one chain. `key` and `sig` are the kernel's ed25519 key and its signature
 * over the JCS of the record without `sig`.
 *
 * What it proves: a history rebuilt without a message (a whole call, a call's last commit, a
 * policy record) or with one added at or before `last_seq` no longer has the heads a signed
 * checkpoint names; the per-call chain (`Commit.prev`) then covers the commits before each head.
 * Removing the newest checkpoints themselves is caught only against a checkpoint kept elsewhere
 * (`wk audit checkpoint --out`).
 */
export const Checkpoint = Schema.Struct({
  kind: Schema.Literal("checkpoint"),
  prev: Schema.String,
  from_seq: Schema.Number,
  last_seq: Schema.Number,
  heads: Schema.Array(CheckpointHead),
  /**
   * Commits the signing kernel stored itself and found gone or changed when it checkpointed
   * (`[held id, seq, digest it stored]`): absent when there are none.
   */
  missing: Schema.optional(Schema.Array(CheckpointHead)),
  at: Schema.String,
  key: Schema.String,
  sig: Schema.String
})
export type Checkpoint = typeof Checkpoint.Type

/** The subject name (after the events prefix) that checkpoints are stored on. */
export const CheckpointSubject = "_checkpoint"

/** What a checkpoint's signature covers: the JCS of the record without `sig`. */
export const checkpointSigningBytes = (c: Omit<Checkpoint, "sig"> & { readonly sig?: string }): string => {
  const { sig: _, ...rest } = c
  return canonicalize(rest)
}

/** The digest a later checkpoint names as `prev`: sha256 (hex) of a checkpoint's stored bytes. */
export const checkpointDigest = (stored: Uint8Array): string => sha256Hex(stored)

/** A checkpoint of `heads` over `from_seq..last_seq`, chained to `prev` and signed with `key`. */
export const signCheckpoint = (
  body: { readonly prev: string; readonly from_seq: number; readonly last_seq: number; readonly heads: ReadonlyArray<CheckpointHead>; readonly missing?: ReadonlyArray<CheckpointHead>; readonly at: string },
  key: CommitKey
): Checkpoint => {
  const unsigned = {
    kind: "checkpoint" as const,
    prev: body.prev,
    from_seq: body.from_seq,
    last_seq: body.last_seq,
    heads: body.heads,
    ...(body.missing !== undefined && body.missing.length > 0 ? { missing: body.missing } : {}),
    at: body.at,
    key: key.publicKey
  }
  return { ...unsigned, sig: Buffer.from(ed25519Sign(Buffer.from(checkpointSigningBytes(unsigned)), key.secretKey)).toString("base64") }
}

/** Whether a checkpoint's `sig` verifies under its `key`. */
export const checkpointSignatureValid = (c: Checkpoint): boolean =>
  ed25519Verify(Buffer.from(checkpointSigningBytes(c)), Buffer.from(c.sig, "base64"), Buffer.from(c.key, "base64"))

/**
 * The heads of the messages given (any order): per subject name, its message with the highest
 * sequence, sorted by name. `name` maps a message to its subject name, or undefined to leave it out.
 */
export const headsOf = <M extends { readonly seq: number; readonly data: Uint8Array }>(messages: Iterable<M>, name: (m: M) => string | undefined): Array<CheckpointHead> => {
  const last = new Map<string, M>()
  for (const m of messages) {
    const n = name(m)
    if (n === undefined || n === CheckpointSubject) continue
    const seen = last.get(n)
    if (seen === undefined || seen.seq < m.seq) last.set(n, m)
  }
  return [...last].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([n, m]) => [n, m.seq, sha256Hex(m.data)] as const)
}

const decode = Schema.decodeUnknownEither(Schema.parseJson(Checkpoint))
const decoder = new TextDecoder()
const encoder = new TextEncoder()

/** A checkpoint as stored: its JSON text. */
export const encodeCheckpoint = (c: Checkpoint): Uint8Array => encoder.encode(JSON.stringify(c))

/** A stored checkpoint decoded, or why it does not decode. */
export const decodeCheckpoint = (data: Uint8Array) => decode(decoder.decode(data))
