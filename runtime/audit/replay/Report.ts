import type { AuditReport, CheckResult, ProjectionSummary, Violation } from "../AuditReport.js"
import type { Collected } from "./Collect.js"
import type { ReplayPlan } from "./Plan.js"
import type { Tallied } from "./Tally.js"
import type { Trusted } from "./Verify.js"

/** The checks over the whole replay that read more than the calls' commits. */
export interface StreamWideChecks {
  readonly checkpoints: CheckResult
  readonly standing: CheckResult
  readonly projection: CheckResult
  readonly projectionSummary: ProjectionSummary | null
  readonly pins: CheckResult
  readonly rerun: CheckResult
  readonly bearer: CheckResult
}

/** A check's result with more violations (failed when there are any). */
export const withViolations = (r: CheckResult, more: ReadonlyArray<Violation>): CheckResult =>
  more.length === 0 ? r : { ...r, status: "failed", violations: [...r.violations, ...more] }

/** What the delivery check could not prove about the deliveries' signatures and chain. */
export const deliveryNote = (d: { readonly unsigned: number; readonly unchained: number }, kernelKeys: boolean, note: string | undefined): { note?: string } => {
  const parts = [note, d.unsigned > 0 ? `${d.unsigned} delivery message(s) unsigned${kernelKeys ? "" : " (pass --trust with kernel_keys to require signatures)"}` : undefined, d.unchained > 0 ? `${d.unchained} signed delivery message(s) name no commit digest` : undefined].filter((s) => s !== undefined)
  return parts.length === 0 ? {} : { note: parts.join("; ") }
}

/** Stage 6 (pure): every check's result in report order, and the report. */
export const reportOf = (plan: ReplayPlan, collected: Collected, trusted: Trusted, tallied: Tallied, wide: StreamWideChecks, durationMs: number): AuditReport => {
  const { selection } = plan
  const kernelKeys = trusted.kernelKeys
  const deliveries = collected.deliveries
  const held = tallied.held.map((c) =>
    c.name !== "delivery"
      ? c
      : deliveries._tag === "skipped"
        ? { ...c, note: deliveries.note }
        : withViolations({ ...c, ...deliveryNote(tallied.deliveryChain, kernelKeys !== undefined, c.note) }, tallied.deliveryChain.violations)
  )
  const registry = trusted.registry
  const registryViolations = [...registry.finding.violations, ...trusted.placement.finding().violations]
  const streamViolations = [...collected.streamViolations, ...trusted.streamViolations, ...tallied.streamViolations]
  const archiveViolations = [...collected.archiveViolations, ...trusted.archiveViolations]
  const archived = collected.archived
  const all: Array<CheckResult> = [
    {
      name: "registry",
      status: registryViolations.length > 0 ? "failed" : registry.finding.unverified.length > 0 ? "pending" : "passed",
      checked: registry.finding.checked,
      violations: registryViolations,
      unverified: registry.finding.unverified,
      note: registry.origin
    },
    { name: "stream", status: streamViolations.length > 0 ? "failed" : "passed", checked: collected.events + collected.backfilled, violations: streamViolations, unverified: [] },
    {
      name: "archive",
      status: archiveViolations.length > 0 ? "failed" : "passed",
      checked: archived.records,
      violations: archiveViolations,
      unverified: [],
      note: `${archived.records} archive(s) verified against their SHA-256; ${collected.archivedCommits} archived commit(s) replayed${trusted.unsignedArchives > 0 ? `; ${trusted.unsignedArchives} archive record(s) unsigned (pass --trust with kernel_keys to require signed purges)` : ""}`
    },
    withViolations(tallied.chain, kernelKeys?.violations ?? []),
    wide.checkpoints,
    {
      name: "store-time",
      status: tallied.storeTimeViolations.length > 0 ? "failed" : "passed",
      checked: tallied.storeTimed,
      violations: tallied.storeTimeViolations,
      unverified: [],
      note: `store times within ${Math.round(plan.storeSkewMs / 1000)} s of their events' time (archived commits carry none)`
    },
    ...held,
    wide.standing,
    wide.projection,
    wide.pins,
    wide.rerun,
    wide.bearer
  ]
  const violations = all.reduce((n, c) => n + c.violations.length, 0)
  const read = collected.events + collected.backfilled
  return {
    ok: violations === 0,
    stream: plan.stream,
    selection: "held" in selection ? { held: selection.held } : "since" in selection ? { since: selection.since.toISOString() } : { from_seq: selection.fromSeq },
    first_seq: collected.firstSeq,
    last_seq: collected.lastSeq,
    events: collected.events,
    backfilled: collected.backfilled,
    archived: collected.archivedCommits,
    held_calls: tallied.heldCalls,
    policy_epochs: trusted.policy.epochs.map((e) => e.epoch),
    registry_rooted: registry.rooted,
    registry_origin: registry.origin,
    checkpoints_anchored: plan.wholeStream && plan.mustHold.length > 0 && wide.checkpoints.status === "passed",
    duration_ms: durationMs,
    events_per_second: Math.round((read / Math.max(1, durationMs)) * 1000),
    checks: all,
    projection: wide.projectionSummary,
    violations
  }
}
