/**
 * The commits this process stored (sequence, held id, digest of the stored bytes) since the
 * checkpointer last verified them. The next checkpoint looks each one up in `WK_EVENTS` and names,
 * signed, any that is gone or changed: someone holding the kernel's NATS credentials removed or
 * rewrote it before a checkpoint could cover it. Recording is a map insert per commit; entries
 * leave once verified. Bounded: past `Limit` unverified commits the oldest are dropped (and
 * counted), so a process that never checkpoints holds no more than that.
 */
export interface WrittenCommit {
  readonly seq: number
  readonly heldId: string
  readonly digest: string
}

const Limit = 200_000

const written = new Map<number, WrittenCommit>()
let dropped = 0

/** Records a commit this process stored. */
export const recordWritten = (c: WrittenCommit): void => {
  written.set(c.seq, c)
  if (written.size > Limit) {
    written.delete(written.keys().next().value!)
    dropped++
  }
}

/** The commits recorded and not yet verified, oldest first. */
export const unverifiedWritten = (): ReadonlyArray<WrittenCommit> => [...written.values()]

/** Forgets commits once a checkpoint verified them. */
export const forgetWritten = (seqs: Iterable<number>): void => {
  for (const s of seqs) written.delete(s)
}

/** How many unverified commits were dropped for the bound. */
export const droppedWritten = (): number => dropped

/** How many commits are recorded and not yet verified. */
export const unverifiedCount = (): number => written.size
