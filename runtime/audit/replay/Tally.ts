import { auditTally, tally } from "../Audit.js"
import type { CheckResult, Violation } from "../AuditReport.js"
import { appliedUsesOf, type AppliedUse, type CheckContext } from "../checks/index.js"
import type { Traced } from "../HeldHistory.js"
import type { HeldEvent } from "../../schema/Events.js"
import type { CallOutcome } from "./CheckCall.js"
import type { Trusted } from "./Verify.js"

/** Whether a call recorded a plugin decision the rerun can check (only those keep their steps). */
export const hasPluginDecision = (call: { readonly steps: ReadonlyArray<{ readonly event: HeldEvent }> }): boolean =>
  call.steps.some((s) => "decisions" in s.event && s.event.decisions.some((d) => d.digest !== undefined))

/** The per-call outcomes summed up, per check. */
export interface Tallied {
  readonly heldCalls: number
  /** `stream` violations found in the calls' commits. */
  readonly streamViolations: ReadonlyArray<Violation>
  readonly storeTimeViolations: ReadonlyArray<Violation>
  readonly storeTimed: number
  /** `commit-chain`, with what it could not prove (see chainNote). */
  readonly chain: CheckResult
  readonly chainGaps: { readonly unchained: number; readonly unsigned: number; readonly unanchored: number }
  readonly deliveryChain: { readonly violations: ReadonlyArray<Violation>; readonly unsigned: number; readonly unchained: number }
  /** Each call's re-fold (steps kept only where a re-run needs them). */
  readonly traced: ReadonlyArray<Traced>
  /** One result per pure held-call check, in report order. */
  readonly held: ReadonlyArray<CheckResult>
  /** Standing approvals the calls used. */
  readonly applied: ReadonlyArray<AppliedUse>
}

/**
 * Stage 5: sums the calls' outcomes in stream order, whatever order they were checked in, and
 * feeds each event's place to the policy records' placement.
 */
export const replayTally = (trusted: Trusted, options: { readonly keepPluginSteps: boolean }) => {
  const calls = auditTally({ keepSteps: options.keepPluginSteps && hasPluginDecision })
  const chains = tally()
  const streamViolations: Array<Violation> = []
  const storeTimeViolations: Array<Violation> = []
  const deliveryChain = { violations: [] as Array<Violation>, unsigned: 0, unchained: 0 }
  const chainGaps = { unchained: 0, unsigned: 0, unanchored: 0 }
  const applied: Array<AppliedUse> = []
  let storeTimed = 0
  let heldCalls = 0
  const add = (o: CallOutcome): void => {
    if (o.stream.length > 0) streamViolations.push(...o.stream)
    if (o.storeTime.length > 0) storeTimeViolations.push(...o.storeTime)
    storeTimed += o.storeTimed
    if (o.delivery.violations.length > 0) deliveryChain.violations.push(...o.delivery.violations)
    deliveryChain.unsigned += o.delivery.unsigned
    deliveryChain.unchained += o.delivery.unchained
    chains.add("commit-chain", o.chain)
    if (o.chain.unchained) chainGaps.unchained++
    chainGaps.unsigned += o.chain.unsigned
    chainGaps.unanchored += o.chain.unanchored
    for (const p of o.placed) {
      trusted.placement.see(p.seq, p.at)
      if (p.epoch !== undefined) trusted.placement.claim(p.seq, o.heldId, p.epoch, p.at)
    }
    if (o.audited === undefined) return
    heldCalls++
    applied.push(...appliedUsesOf(o.audited.call))
    calls.add(o.audited)
  }
  const done = (ctx: CheckContext, kernelKeys: boolean): Tallied => ({
    heldCalls,
    streamViolations,
    storeTimeViolations,
    storeTimed,
    chain: chains.result("commit-chain", chainNote(chainGaps, kernelKeys)),
    chainGaps,
    deliveryChain,
    traced: calls.traced,
    held: calls.results(ctx),
    applied
  })
  return { add, done }
}

/** What the commit-chain check could not prove, said plainly (nothing when everything was chained and signed under a root's key). */
export const chainNote = (gaps: { readonly unchained: number; readonly unsigned: number; readonly unanchored: number }, kernelKeys: boolean): string | undefined => {
  const parts: Array<string> = []
  if (gaps.unchained > 0) parts.push(`${gaps.unchained} call(s) unchained (no prev): removal or reordering in them cannot be proven`)
  if (gaps.unsigned > 0) parts.push(`${gaps.unsigned} commit(s) unsigned`)
  if (gaps.unanchored > 0) parts.push(`${gaps.unanchored} signed commit(s) unanchored`)
  if (!kernelKeys) parts.push("no kernel_keys in a trust root: signatures are not required nor anchored (pass --trust)")
  return parts.length === 0 ? undefined : parts.join("; ")
}
