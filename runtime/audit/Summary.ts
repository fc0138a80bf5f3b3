import type { AuditReport, CheckResult } from "./AuditReport.js"
import type { ReadProgress } from "./StreamReader.js"

const mark = (c: CheckResult) => (c.status === "passed" ? "ok  " : c.status === "failed" ? "FAIL" : c.status === "pending" ? "wait" : "skip")

/** The human summary of a replay: one line per check, its violations (first 20) and notes. */
export const formatReport = (r: AuditReport, maxPerCheck = 20): string => {
  const sel = r.selection.held !== undefined ? `held call ${r.selection.held}` : r.selection.since !== undefined ? `since ${r.selection.since}` : `from seq ${r.selection.from_seq ?? 1}`
  const lines = [
    `wk audit replay: ${r.stream}, ${sel}: seq ${r.first_seq}..${r.last_seq}, ${r.events} messages read, ${r.backfilled} backfilled, ${r.held_calls} held calls, policy epochs [${r.policy_epochs.join(", ")}]`,
    `  ${r.duration_ms} ms, ${r.events_per_second} events/s`,
    `  ${r.registry_rooted ? "registry from" : "WARNING"}: ${r.registry_origin}`,
    `  checkpoints: ${r.checkpoints_anchored ? "the chain holds every checkpoint kept outside the stream" : "not anchored outside the stream"}`
  ]
  const width = Math.max(...r.checks.map((c) => c.name.length))
  for (const c of r.checks) {
    const counts = c.status === "skipped" ? "" : `${c.checked} checked, ${c.violations.length} violation(s)${c.unverified.length > 0 ? `, ${c.unverified.length} unverified` : ""}`
    lines.push(`  ${mark(c)} ${c.name.padEnd(width)}  ${counts}${c.note ? `${counts ? "; " : ""}${c.note}` : ""}`)
    for (const v of c.violations.slice(0, maxPerCheck)) lines.push(`         ${v.held_id || "(stream)"}${v.seqs.length > 0 ? ` seq ${v.seqs.join(",")}` : ""}: ${v.message}`)
    if (c.violations.length > maxPerCheck) lines.push(`         ... ${c.violations.length - maxPerCheck} more (use --json)`)
    for (const u of c.unverified.slice(0, 5)) lines.push(`         unverified ${u.held_id}${u.seqs.length > 0 ? ` seq ${u.seqs.join(",")}` : ""}: ${u.message}`)
    if (c.unverified.length > 5) lines.push(`         ... ${c.unverified.length - 5} more unverified (use --json)`)
  }
  lines.push(r.ok ? "OK: no violations" : `FAILED: ${r.violations} violation(s)`)
  return lines.join("\n")
}

/** A progress line: phase, position, rate and ETA. */
export const formatProgress = (p: ReadProgress & { readonly phase: string }): string => {
  const rate = p.read / Math.max(0.001, p.elapsedMs / 1000)
  const eta = rate > 0 ? Math.max(0, (p.total - p.read) / rate) : 0
  const pct = p.total > 0 ? Math.floor((p.read / p.total) * 100) : 100
  return `wk audit: ${p.phase} ${p.read}/${p.total} (${pct}%) at seq ${p.seq}, ${Math.round(rate)} events/s, ETA ${eta.toFixed(1)} s`
}
