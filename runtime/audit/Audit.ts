import type { CheckName, CheckResult, Violation } from "./AuditReport.js"
import { trace, type HeldHistory, type Traced } from "./HeldHistory.js"
import { heldChecks, type CheckContext, type Finding, type Unverified } from "./checks/index.js"

/** Accumulates findings per check across calls. */
export const tally = () => {
  const byName = new Map<CheckName, { checked: number; violations: Array<Violation>; unverified: Array<Unverified> }>()
  const add = (name: CheckName, f: Finding) => {
    const t = byName.get(name) ?? { checked: 0, violations: [], unverified: [] }
    t.checked += f.checked
    if (f.violations.length > 0) t.violations.push(...f.violations)
    if (f.unverified.length > 0) t.unverified.push(...f.unverified)
    byName.set(name, t)
  }
  const result = (name: CheckName, note?: string): CheckResult => {
    const t = byName.get(name) ?? { checked: 0, violations: [], unverified: [] }
    return {
      name,
      status: t.violations.length > 0 ? "failed" : t.unverified.length > 0 ? "pending" : "passed",
      checked: t.checked,
      violations: t.violations,
      unverified: t.unverified,
      ...(note !== undefined ? { note } : {})
    }
  }
  return { add, result }
}

/** A check that did not run, and why. */
export const skipped = (name: CheckName, note: string): CheckResult => ({ name, status: "skipped", checked: 0, violations: [], unverified: [], note })

/** One held call re-folded and checked: its trace and one finding per check of `heldChecks`, in order. */
export interface AuditedCall {
  readonly call: Traced
  readonly findings: ReadonlyArray<Finding>
}

/** Re-folds one call with the kernel's reducer and runs every pure check on it. */
export const auditCall = (h: HeldHistory, ctx: CheckContext): AuditedCall => {
  const call = trace(h)
  return { call, findings: heldChecks.map((check) => check.run(call, ctx)) }
}

/**
 * Accumulates audited calls in order: the traces (steps dropped unless `keepSteps` says to keep
 * them, for all calls or those it selects, so a long
 * replay stays in young GC) and the findings per check; `results` gives one result per check,
 * `delivery` noted when the context has no deliveries.
 */
export const auditTally = (options: { readonly keepSteps?: boolean | ((call: Traced) => boolean) } = {}) => {
  const t = tally()
  const traced: Array<Traced> = []
  const add = ({ call, findings }: AuditedCall) => {
    for (let i = 0; i < heldChecks.length; i++) t.add(heldChecks[i]!.name, findings[i]!)
    const keep = typeof options.keepSteps === "function" ? options.keepSteps(call) : options.keepSteps === true
    traced.push(keep ? call : { heldId: call.heldId, steps: [], facts: call.facts })
  }
  // The registry's own history is checked where it is derived (TrustedRegistry, `registry`).
  const results = (ctx: CheckContext): ReadonlyArray<CheckResult> =>
    heldChecks.map((c) =>
      c.name === "delivery" && ctx.deliveries === undefined ? withNote(t.result(c.name), "sessions stream not read: only calls that ended undelivered are checked") : t.result(c.name)
    )
  return { add, traced, results }
}

/**
 * Runs every pure check over in-memory histories (no NATS): re-folds each call with the
 * kernel's reducer and returns the final facts of each call (with its steps when `keepSteps`)
 * and one result per check. `delivery` is
 * reported skipped when the context has no deliveries.
 */
export const auditHistories = (
  histories: Iterable<HeldHistory>,
  ctx: CheckContext,
  options: { readonly keepSteps?: boolean } = {}
): { readonly traced: ReadonlyArray<Traced>; readonly checks: ReadonlyArray<CheckResult> } => {
  const t = auditTally(options)
  for (const h of histories) t.add(auditCall(h, ctx))
  return { traced: t.traced, checks: t.results(ctx) }
}

const withNote = (r: CheckResult, note: string): CheckResult => ({ ...r, note })
