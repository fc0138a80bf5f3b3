import { Either } from "effect"
import { appendFileSync, existsSync, readFileSync } from "node:fs"
import { parseAnchor } from "../ledger/CheckpointAnchor.js"
import { checkpointSignatureValid, decodeCheckpoint } from "../schema/Checkpoint.js"

/** What a pull did: lines added to the auditor's copy, and how many it holds now. */
export interface AnchorPulled {
  readonly added: number
  readonly total: number
  /** The newest checkpoint's covered range end and sequence (none when the copy is empty). */
  readonly newest?: { readonly seq: number; readonly last_seq: number }
}

/**
 * `wk audit anchor pull`: copies the checkpoints a kernel anchored (`from`, the kernel's
 * `WK_ANCHOR_FILE` or a copy of it) into the auditor's own file (`to`), which only grows. The
 * auditor's copy must be a prefix of the anchor, byte for byte: an anchor whose earlier lines
 * changed or went missing since the last pull is refused, naming the line, and nothing is
 * added. Each new line must hold a checkpoint whose signature verifies under its key (whether the
 * key is the kernel's is the replay's question, against the trust root).
 */
export const pullAnchor = (from: string, to: string): AnchorPulled => {
  if (!existsSync(from)) throw new Error(`no anchor at ${from}`)
  const source = parseAnchor(readFileSync(from, "utf8"))
  const kept = existsSync(to) ? parseAnchor(readFileSync(to, "utf8")) : []
  if (source.length < kept.length) throw new Error(`${from} holds ${source.length} checkpoint(s), ${to} already holds ${kept.length}: lines were removed from the anchor`)
  kept.forEach((k, i) => {
    if (source[i]!.line !== k.line) throw new Error(`line ${i + 1} of ${from} (checkpoint seq ${source[i]!.seq}) differs from the one pulled before (seq ${k.seq}): the anchor was rewritten`)
  })
  const fresh = source.slice(kept.length)
  for (const [i, c] of fresh.entries()) {
    const d = decodeCheckpoint(c.data)
    const n = kept.length + i + 1
    if (Either.isLeft(d)) throw new Error(`line ${n} of ${from} is not a checkpoint: ${d.left.message.slice(0, 200)}`)
    if (!checkpointSignatureValid(d.right)) throw new Error(`line ${n} of ${from} (checkpoint seq ${c.seq}): its signature does not verify under its key`)
  }
  if (fresh.length > 0) appendFileSync(to, fresh.map((c) => c.line).join(""), { flag: "a" })
  const last = source[source.length - 1]
  const newest = last === undefined ? undefined : Either.getOrUndefined(decodeCheckpoint(last.data))
  return { added: fresh.length, total: source.length, ...(last !== undefined && newest !== undefined ? { newest: { seq: last.seq, last_seq: newest.last_seq } } : {}) }
}
