import { Either } from "effect"
import { checkpointDigest, checkpointSignatureValid, decodeCheckpoint, type Checkpoint, type CheckpointHead } from "../../schema/Checkpoint.js"
import type { CheckResult, Violation } from "../AuditReport.js"
import type { KernelKeys } from "../KernelKeys.js"

/** A message of the history as the auditor holds it (stream or archive): its subject name after the prefix, sequence and bytes. */
export interface HistoryMessage {
  readonly name: string
  readonly seq: number
  readonly data: Uint8Array
}

/** A stored checkpoint message. */
export interface CheckpointMessage {
  readonly seq: number
  readonly data: Uint8Array
}

interface Read {
  readonly seq: number
  readonly data: Uint8Array
  readonly checkpoint: Checkpoint
}

const short = (d: string) => d.slice(0, 12)

/**
 * `checkpoints`: the stream's signed checkpoints form one chain (each names the digest of the one
 * before and covers the sequences right after it), each is signed (with a trust root's kernel
 * keys: by one of them), and the history the auditor read (stream and archives) has, in each
 * checkpoint's range, exactly the heads it names: a call, a call's last commit or a policy record
 * removed, added or changed at or before a checkpoint's `last_seq` is named with the checkpoint.
 * Every checkpoint in `kept` (those the auditor held outside the stream: an anchor's, a saved
 * one) must be in the chain: checkpoints removed from the end of the stream, and everything they
 * covered, are caught there.
 * Messages after the newest checkpoint are counted in the note: no checkpoint covers them yet.
 */
export const checkpointsCheck = (
  stored: ReadonlyArray<CheckpointMessage>,
  history: Iterable<HistoryMessage>,
  lastSeq: number,
  kernelKeys: KernelKeys | undefined,
  kept: ReadonlyArray<Uint8Array>
): CheckResult => {
  const violations: Array<Violation> = []
  const fail = (held_id: string, seqs: ReadonlyArray<number>, message: string) => void violations.push({ check: "checkpoints", held_id, seqs: [...seqs], message })
  const chain: Array<Read> = []
  let unanchored = 0
  for (const m of stored) {
    const d = decodeCheckpoint(m.data)
    if (Either.isLeft(d)) {
      fail("_checkpoint", [m.seq], `seq ${m.seq} is not a checkpoint: ${d.left.message.slice(0, 200)}`)
      continue
    }
    const c = d.right
    const before = chain[chain.length - 1]
    if (!checkpointSignatureValid(c)) fail("_checkpoint", [m.seq], `checkpoint seq ${m.seq}'s signature does not verify under its key`)
    else if (kernelKeys !== undefined && !kernelKeys.trusts(c.key, m.seq)) fail("_checkpoint", [m.seq], `checkpoint seq ${m.seq} is signed by a key the trust root does not list as a kernel key`)
    else if (kernelKeys === undefined) unanchored++
    const expectedPrev = before === undefined ? "" : checkpointDigest(before.data)
    if (c.prev !== expectedPrev) {
      fail("_checkpoint", before === undefined ? [m.seq] : [before.seq, m.seq], before === undefined
        ? `checkpoint seq ${m.seq} is the first but names a previous one (${short(c.prev)}…): earlier checkpoints were removed`
        : `checkpoint seq ${m.seq}'s prev does not match checkpoint seq ${before.seq}: a checkpoint was removed, added or changed`)
    }
    const from = before === undefined ? 1 : before.checkpoint.last_seq + 1
    if (c.from_seq !== from) fail("_checkpoint", [m.seq], `checkpoint seq ${m.seq} covers ${c.from_seq}..${c.last_seq}, but the chain continues at ${from}`)
    if (c.last_seq >= m.seq) fail("_checkpoint", [m.seq], `checkpoint seq ${m.seq} claims to cover up to seq ${c.last_seq}, at or after itself`)
    for (const [name, seq, digest] of c.missing ?? []) {
      fail(name, [m.seq, seq], `checkpoint seq ${m.seq}: the kernel that signed it stored seq ${seq} of ${name} (${short(digest)}…) and found it gone from the stream or changed: it was removed or rewritten`)
    }
    chain.push({ seq: m.seq, data: m.data, checkpoint: c })
  }

  // The history's heads per checkpoint range: each message falls in the first range that ends at or after it.
  const ends = chain.map((r) => r.checkpoint.last_seq)
  const starts = chain.map((r) => r.checkpoint.from_seq)
  const actual: Array<Map<string, HistoryMessage>> = chain.map(() => new Map())
  let uncovered = 0
  const newest = ends.length === 0 ? 0 : ends[ends.length - 1]!
  for (const m of history) {
    if (m.seq > newest) {
      uncovered++
      continue
    }
    let lo = 0
    let hi = ends.length - 1
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (ends[mid]! >= m.seq) hi = mid
      else lo = mid + 1
    }
    if (m.seq < starts[lo]!) continue // a gap between ranges is already a chain violation
    const heads = actual[lo]!
    const seen = heads.get(m.name)
    if (seen === undefined || seen.seq < m.seq) heads.set(m.name, m)
  }
  let checkedHeads = 0
  for (let i = 0; i < chain.length; i++) {
    const r = chain[i]!
    const range = `${r.checkpoint.from_seq}..${r.checkpoint.last_seq}`
    const found = actual[i]!
    const named = new Map<string, CheckpointHead>(r.checkpoint.heads.map((h) => [h[0], h]))
    for (const [name, [, seq, digest]] of named) {
      checkedHeads++
      const m = found.get(name)
      if (m === undefined) fail(name, [r.seq, seq], `checkpoint seq ${r.seq} names ${name}'s message at seq ${seq} in ${range}, but the history holds none of ${name} in that range: it was removed`)
      else if (m.seq !== seq || checkpointDigest(m.data) !== digest) {
        fail(name, [r.seq, m.seq], `checkpoint seq ${r.seq} names ${name}'s last message in ${range} as seq ${seq} (${short(digest)}…), the history has seq ${m.seq} (${short(checkpointDigest(m.data))}…): a message was removed, added or changed`)
      }
    }
    for (const [name, m] of found) {
      if (!named.has(name)) fail(name, [r.seq, m.seq], `the history holds ${name}'s seq ${m.seq} in ${range}, which checkpoint seq ${r.seq} does not name: it was added after the checkpoint was signed`)
    }
  }

  let keptNote: string | undefined
  if (kept.length > 0) {
    const digests = new Map(chain.map((r) => [checkpointDigest(r.data), r]))
    let held = 0
    let newestKept: Read | undefined
    kept.forEach((data, i) => {
      const which = kept.length === 1 ? "the kept checkpoint" : `kept checkpoint ${i + 1} of ${kept.length}`
      const d = decodeCheckpoint(data)
      if (Either.isLeft(d)) return fail("_checkpoint", [], `${which} is not a checkpoint: ${d.left.message.slice(0, 200)}`)
      if (!checkpointSignatureValid(d.right)) return fail("_checkpoint", [], `${which}'s signature does not verify under its key`)
      if (kernelKeys !== undefined && !kernelKeys.keys.includes(d.right.key)) return fail("_checkpoint", [], `${which} is signed by a key the trust root does not list as a kernel key`)
      const at = digests.get(checkpointDigest(data))
      if (at === undefined) {
        return fail("_checkpoint", [], newest < d.right.last_seq
          ? `${which} covers up to seq ${d.right.last_seq}, but the stream's checkpoints end at seq ${newest}: checkpoints were removed with what they covered`
          : `${which} (up to seq ${d.right.last_seq}) is not in the stream's checkpoint chain: the history was rewritten`)
      }
      held++
      if (newestKept === undefined || at.seq > newestKept.seq) newestKept = at
    })
    if (newestKept !== undefined) keptNote = `${held} kept checkpoint(s) in the chain, the newest checkpoint seq ${newestKept.seq} (up to seq ${newestKept.checkpoint.last_seq})`
  } else if (chain.length > 0) keptNote = "no kept checkpoint (--anchor): removing the newest checkpoints with what they covered cannot be shown"
  const notes = [
    chain.length === 0 && lastSeq > 0
      ? "the stream holds no checkpoint: removing a whole call or a call's newest commits cannot be shown"
      : `${chain.length} checkpoint(s), ${checkedHeads} head(s) compared`,
    uncovered > 0 ? `${uncovered} message(s) after seq ${newest} are not covered by a checkpoint yet` : undefined,
    unanchored > 0 ? `${unanchored} checkpoint(s) signed by keys no trust root anchors (pass --trust)` : undefined,
    keptNote
  ].filter((s) => s !== undefined)
  return {
    name: "checkpoints",
    status: violations.length > 0 ? "failed" : "passed",
    checked: chain.length,
    violations,
    unverified: [],
    note: notes.join("; ")
  }
}
