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
}

/** Builds the history; records may arrive in any order and more than once. */
export const policyHistory = (records: ReadonlyArray<PolicyApplied & { readonly seq?: number }>, skewMs = DefaultRegistrySkewMs): PolicyHistory => {
  const byNumber = new Map<number, PolicyEpoch>()
  for (const r of records) {
    if (byNumber.has(r.epoch)) continue
    byNumber.set(r.epoch, { epoch: r.epoch, from: Date.parse(r.at), policy: activePolicy(r.epoch, r.profiles), seq: r.seq ?? 0, ...(r.applied_by !== undefined ? { applied_by: r.applied_by } : {}) })
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
  return { epochs, skewMs, around, byEpoch: (n) => byNumber.get(n), at: atPoint }
}
