import { activePolicy, type ActivePolicy } from "../policy/ActivePolicy.js"
import type { AppliedBy, PolicyApplied } from "../schema/PolicyApplied.js"

/** How far apart a request's authentication and its event's `at` may be from a policy change. */
export const DefaultRegistrySkewMs = 5_000

/** One epoch of the registry and when it took effect. */
export interface PolicyEpoch {
  readonly epoch: number
  readonly from: number
  readonly policy: ActivePolicy
  /** Stream sequence of its `policy.applied` record (0 when given in memory). */
  readonly seq: number
  /** The server's store time (ms) of its record (0 when unknown: in memory, or not read). */
  readonly stored: number
  /** What made it, as its record says (absent: profile files at start-up, or not recorded). */
  readonly applied_by?: AppliedBy
}

/**
 * The principal registry by time, rebuilt from `policy.applied` records. Pure. An event is
 * judged against every epoch in force at some moment within `skewMs` of its `at`: a request is
 * authenticated with the policy the kernel held, a few milliseconds before its event is stamped,
 * and kernel processes learn of a new epoch from a KV watch.
 */
export interface PolicyHistory {
  readonly epochs: ReadonlyArray<PolicyEpoch>
  readonly skewMs: number
  /** Epochs in force around `at` (empty before the first record). */
  readonly around: (at: string) => ReadonlyArray<PolicyEpoch>
  /** The epoch with this number, if recorded. */
  readonly byEpoch: (epoch: number) => PolicyEpoch | undefined
  /**
   * The epoch in force at a point of the log: by stream order when the records carry their
   * sequences, by time otherwise. Undefined before the first record.
   */
  readonly at: (seq: number, at: string) => PolicyEpoch | undefined
  /**
   * The registries a signed request stored at `seq` may have been judged under, from the store's
   * order, never from the writer's claimed time: the epoch whose record precedes it in the stream,
   * and the next epoch too when its record was stored within `skewMs` after the request (the
   * policy store puts an epoch in force in KV before it appends the record, so a kernel may judge
   * under it a moment before the record is stored; a later epoch never helps a backdated request,
   * which needs an earlier one). `stored` is the request's own store time (0: unknown, an archived
   * commit: its position alone decides). Records without sequences (in memory) fall back to
   * `around(at)`.
   */
  readonly registryAt: (seq: number, at: string, stored: number) => ReadonlyArray<PolicyEpoch>
}

/** Builds the history; records may arrive in any order and more than once. */
export const policyHistory = (records: ReadonlyArray<PolicyApplied & { readonly seq?: number; readonly stored?: number }>, skewMs = DefaultRegistrySkewMs): PolicyHistory => {
  const byNumber = new Map<number, PolicyEpoch>()
  for (const r of records) {
    if (byNumber.has(r.epoch)) continue
    byNumber.set(r.epoch, { epoch: r.epoch, from: Date.parse(r.at), policy: activePolicy(r.epoch, r.profiles), seq: r.seq ?? 0, stored: r.stored ?? 0, ...(r.applied_by !== undefined ? { applied_by: r.applied_by } : {}) })
  }
  const epochs = [...byNumber.values()].sort((a, b) => a.epoch - b.epoch)
  const around = (at: string): ReadonlyArray<PolicyEpoch> => {
    const t = Date.parse(at)
    const out: Array<PolicyEpoch> = []
    for (let i = 0; i < epochs.length; i++) {
      const e = epochs[i]!
      const until = i + 1 < epochs.length ? epochs[i + 1]!.from : Infinity
      if (e.from <= t + skewMs && until >= t - skewMs) out.push(e)
    }
    return out
  }
  const bySeq = epochs.every((e) => e.seq > 0)
  const atPoint = (seq: number, at: string): PolicyEpoch | undefined => {
    const t = Date.parse(at)
    let found: PolicyEpoch | undefined
    for (const e of epochs) if (bySeq ? e.seq < seq : e.from <= t) found = e
    return found
  }
  const byPosition = [...epochs].sort((a, b) => a.seq - b.seq)
  const registryAt = (seq: number, at: string, stored: number): ReadonlyArray<PolicyEpoch> => {
    if (!bySeq) return around(at)
    let i = -1
    for (let j = 0; j < byPosition.length && byPosition[j]!.seq < seq; j++) i = j
    const out: Array<PolicyEpoch> = []
    const current = byPosition[i]
    const next = byPosition[i + 1]
    if (current !== undefined) out.push(current)
    if (next !== undefined && stored > 0 && next.stored > 0 && next.stored - stored <= skewMs) out.push(next)
    return out
  }
  return { epochs, skewMs, around, byEpoch: (n) => byNumber.get(n), at: atPoint, registryAt }
}
