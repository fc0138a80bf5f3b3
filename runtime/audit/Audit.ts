import type { CheckName, CheckResult, Violation } from "./AuditReport.js"
import { trace, type HeldHistory, type Traced } from "./HeldHistory.js"
import { heldChecks, type CheckContext, type Finding, type Unverified } from "./checks/index.js"

/** Accumulates findings per check across calls. */
export const tally = () => {
  const byName = new Map<CheckName, { checked: number; violations: Array<Violation>; unverified: Array<Unverified> }>()
  const add = (name: CheckName, f: Finding) => {
    const t = byName.get(name) ?? { checked: 0, violations: [], unverified: [] }
    t.checked += f.checked
    t.violations.push(...f.violations)
    t.unverified.push(...f.unverified)
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
  const t = tally()
  const traced: Array<Traced> = []
  for (const h of histories) {
    const call = trace(h)
    for (const check of heldChecks) t.add(check.name, check.run(call, ctx))
    // Steps are dropped once checked unless asked for: a long replay then stays in young GC.
    traced.push(options.keepSteps === true ? call : { heldId: call.heldId, steps: [], facts: call.facts })
  }
  const checks = heldChecks.map((c) =>
    c.name === "delivery" && ctx.deliveries === undefined ? withNote(t.result(c.name), "sessions stream not read: only calls that ended undelivered are checked") : t.result(c.name)
  )
  return { traced, checks }
}

const withNote = (r: CheckResult, note: string): CheckResult => ({ ...r, note })
