import type { Violation } from "./AuditReport.js"
import type { PolicyRecord } from "./TrustedRegistry.js"

/**
 * Whether each `policy.applied` record sits where it was written: the kernel stamps a record
 * just before appending it, so every held-call event before it in the stream was stamped no
 * later than the record (within `skewMs`) and every event after it no earlier. A record moved
 * to another place in the stream (to change which epoch a decision is judged under) lands among
 * events whose times contradict its own. Events are fed in any order with `see`; per gap
 * between records only the earliest and latest times are kept. And no event claims an epoch
 * (`policy_epoch`) at a place of the stream before that epoch's record, unless stamped within
 * `skewMs` of it (`claim`).
 */
export const recordPlacement = (records: ReadonlyArray<PolicyRecord>, skewMs: number) => {
  const sorted = [...records].sort((a, b) => a.seq - b.seq)
  const seqs = sorted.map((r) => r.seq)
  const times = sorted.map((r) => Date.parse(r.at))
  // Gap g holds the events between record g-1 and record g (gap 0: before the first record).
  const gaps = sorted.length + 1
  const earliest = new Array<number>(gaps).fill(Infinity)
  const latest = new Array<number>(gaps).fill(-Infinity)
  const latestSeq = new Array<number>(gaps).fill(0)
  const earliestSeq = new Array<number>(gaps).fill(0)
  const gapOf = (seq: number): number => {
    let lo = 0
    let hi = seqs.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (seqs[mid]! < seq) lo = mid + 1
      else hi = mid
    }
    return lo
  }
  const see = (seq: number, at: string): void => {
    if (seqs.length === 0) return
    const t = Date.parse(at)
    const g = gapOf(seq)
    if (t < earliest[g]!) (earliest[g] = t), (earliestSeq[g] = seq)
    if (t > latest[g]!) (latest[g] = t), (latestSeq[g] = seq)
  }
  const recordSeq = new Map(sorted.map((r) => [r.epoch, r]))
  const violations: Array<Violation> = []
  // A kernel may decide under a new epoch (learnt from the KV watch) and append before the
  // record of that epoch is appended: within `skewMs` of the record's stamp, that is the race.
  const claim = (seq: number, heldId: string, epoch: number, at: string): void => {
    const r = recordSeq.get(epoch)
    if (r !== undefined && r.seq > seq && Date.parse(at) > Date.parse(r.at) + skewMs) violations.push({ check: "registry", held_id: heldId, seqs: [seq, r.seq], message: `an event at seq ${seq} claims epoch ${epoch}, whose record sits later in the stream (seq ${r.seq}): policy record moved` })
  }
  const finding = (): { readonly violations: ReadonlyArray<Violation> } => {
    for (let i = 0; i < sorted.length; i++) {
      const r = sorted[i]!
      const t = times[i]!
      const fail = (other: number, message: string) => void violations.push({ check: "registry", held_id: `policy.applied:e${r.epoch}`, seqs: [r.seq, other], message })
      if (latest[i]! > t + skewMs) fail(latestSeq[i]!, `policy record moved: epoch ${r.epoch} (at ${r.at}) sits after an event stamped ${new Date(latest[i]!).toISOString()}`)
      if (earliest[i + 1]! < t - skewMs) fail(earliestSeq[i + 1]!, `policy record moved: epoch ${r.epoch} (at ${r.at}) sits before an event stamped ${new Date(earliest[i + 1]!).toISOString()}`)
    }
    return { violations }
  }
  return { see, claim, finding }
}
