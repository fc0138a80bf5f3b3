import { Schema } from "effect"
import { canonicalize, sha256Hex } from "./Canonical.js"
import { ed25519Sign, ed25519Verify } from "./Ed25519.js"
import { HeldEvent, type SequencedEvent } from "./Events.js"

/**
 * One message on `wk.v1.events.<held_id>` in `WK_EVENTS`: the events one decision produced,
 * stored together (atomic, CAS'd on the subject's last sequence). An event is addressed by the
 * commit's stream sequence and its `index` in `events`. Every event names the commit's
 * `held_id`. `commit_id` is the JetStream message id, so the same decision committed twice is
 * stored once.
 *
 * The commits of one call form a chain: `prev` is the sha256 (hex) of the previous commit's
 * stored bytes on the same subject ("" for the call's first commit), so removing, inserting or
 * reordering a commit breaks it. `key` and `sig` are the kernel's ed25519 public key and its
 * signature over the commit's canonical JSON without `sig` (`commitSigningBytes`); a kernel
 * without a signing key writes `prev` only. The chain is per call, not per stream: a
 * stream-wide chain would serialize every writer.
 */
export const Commit = Schema.Struct({
  commit_id: Schema.String,
  held_id: Schema.String,
  prev: Schema.optional(Schema.String),
  events: Schema.NonEmptyArray(HeldEvent),
  key: Schema.optional(Schema.String),
  sig: Schema.optional(Schema.String)
})
export type Commit = typeof Commit.Type

/**
 * The id of the commit holding `events`: its first event's id. Event ids are derived from their
 * causes, so a decision retried from the same facts gets the same commit id.
 */
export const commitIdOf = (events: ReadonlyArray<HeldEvent>): string => events[0]!.event_id

/** The commit of `events`, all of one held call (the caller checks that; `commitOf` does not). */
export const commitOf = (events: readonly [HeldEvent, ...Array<HeldEvent>]): Commit => ({
  commit_id: commitIdOf(events),
  held_id: events[0].held_id,
  events
})

/** A kernel's ed25519 signing key: public key (base64) and tweetnacl-style 64-byte secret key. */
export interface CommitKey {
  readonly publicKey: string
  readonly secretKey: Uint8Array
}

/** The digest a later commit names as `prev`: sha256 (hex) of a commit's stored bytes. */
export const commitDigest = (stored: Uint8Array): string => sha256Hex(stored)

/** What a commit's signature covers: the JCS of the commit without `sig`. */
export const commitSigningBytes = (commit: Commit): string => {
  const { sig: _, ...rest } = commit
  return canonicalize(rest)
}

/** `commit` linked to the previous commit of its call (digest `prev`, "" for the first) and signed with `key` when there is one. */
export const chainCommit = (commit: Commit, prev: string, key: CommitKey | undefined): Commit => {
  const linked: Commit = { commit_id: commit.commit_id, held_id: commit.held_id, prev, events: commit.events }
  if (key === undefined) return linked
  const keyed: Commit = { ...linked, key: key.publicKey }
  return { ...keyed, sig: Buffer.from(ed25519Sign(Buffer.from(commitSigningBytes(keyed)), key.secretKey)).toString("base64") }
}

/** Whether a commit's `sig` verifies under its `key` (false when either is missing or malformed). */
export const commitSignatureValid = (commit: Commit): boolean => {
  if (commit.key === undefined || commit.sig === undefined) return false
  return ed25519Verify(Buffer.from(commitSigningBytes(commit)), Buffer.from(commit.sig, "base64"), Buffer.from(commit.key, "base64"))
}

const decodeCommit = Schema.decodeUnknownSync(Commit)
const decoder = new TextDecoder()
const encoder = new TextEncoder()

/** A commit as stored: its JSON text. */
export const encodeCommit = (commit: Commit): Uint8Array => encoder.encode(JSON.stringify(commit))

/** Decodes one stored message body as a commit; throws when it is not one. */
export const decodeCommitBytes = (data: Uint8Array): Commit => decodeCommit(JSON.parse(decoder.decode(data)))

/** The events of the commit stored at `seq`, each with its address (seq, index). */
export const sequencedEvents = (seq: number, commit: Commit): Array<SequencedEvent> => commit.events.map((event, index) => ({ seq, index, event }))

/** A stored message body decoded into its addressed events; throws when it is not a commit. */
export const eventsOfMessage = (seq: number, data: Uint8Array): Array<SequencedEvent> => sequencedEvents(seq, decodeCommitBytes(data))
