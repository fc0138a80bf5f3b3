import { commitDigest, commitSignatureValid, type Commit } from "../../schema/Commit.js"
import { collector, type Finding } from "./Check.js"
import type { KernelKeys } from "../KernelKeys.js"

/** One stored commit of a call as the auditor read it (stream or archive): its bytes, decoded. */
export interface ChainLink {
  readonly seq: number
  readonly data: Uint8Array
  readonly commit: Commit
}

/** What `commitChain` found in one call, with what it could not prove. */
export interface ChainFinding extends Finding {
  /** The call's commits carry no chain at all (written without `prev`, or stripped of it). */
  readonly unchained: boolean
  /** Commits without a signature (counted only without kernel keys; with them each is a violation). */
  readonly unsigned: number
  /** Signed commits whose key no trust root anchors (no kernel keys given). */
  readonly unanchored: number
}

/**
 * `commit-chain`: the commits of one call, in sequence order, form the chain the kernel wrote.
 * Each commit's `prev` must be the digest of the previous commit's stored bytes on its subject
 * ("" for the first), so a commit removed, inserted or reordered inside a call's history breaks
 * it. A commit that carries a signature must verify under its key. With `kernelKeys` (the trust
 * root's), every commit must be signed by one of them: a forger holding the kernel's NATS
 * credentials but not its key cannot rewrite a commit and its chain. Without them, signatures
 * prove only that the commits were written by whoever holds the named key, and unchained or
 * unsigned histories are counted for the report's note, not taken as violations.
 */
export const commitChain = (heldId: string, links: ReadonlyArray<ChainLink>, kernelKeys: KernelKeys | undefined): ChainFinding => {
  const c = collector("commit-chain", heldId)
  const chained = links.some((l) => l.commit.prev !== undefined)
  let before: ChainLink | undefined
  let unsigned = 0
  let unanchored = 0
  for (const l of links) {
    c.count()
    const prev = l.commit.prev
    const expected = before === undefined ? "" : commitDigest(before.data)
    if (prev === undefined) {
      if (chained) c.fail([l.seq], `seq ${l.seq} carries no prev while other commits of the call are chained`)
    } else if (prev !== expected) {
      c.fail(
        before === undefined ? [l.seq] : [before.seq, l.seq],
        before === undefined
          ? `seq ${l.seq} is the call's first commit but names a previous one (${prev.slice(0, 12)}…): a commit before it was removed`
          : `seq ${l.seq}'s prev does not match the digest of seq ${before.seq}, the previous commit on its subject: a commit was removed, inserted or reordered`
      )
    }
    if (l.commit.sig !== undefined || l.commit.key !== undefined) {
      if (!commitSignatureValid(l.commit)) c.fail([l.seq], `seq ${l.seq}'s signature does not verify under its key`)
      else if (kernelKeys !== undefined && !kernelKeys.trusts(l.commit.key!, l.seq)) c.fail([l.seq], `seq ${l.seq} is signed by a key the trust root does not list as a kernel key (nor a rotation from one before it)`)
      else if (kernelKeys === undefined) unanchored++
    } else if (kernelKeys !== undefined) c.fail([l.seq], `seq ${l.seq} is not signed, but the trust root names kernel keys`)
    else unsigned++
    before = l
  }
  return { ...c.done(), unchained: !chained && links.length > 0, unsigned, unanchored }
}
