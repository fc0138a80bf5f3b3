import type { HeldEvent } from "../schema/Events.js"
import type { HeldCallFacts } from "../schema/Facts.js"
import { kernelMetrics } from "./KernelMetrics.js"

// When each held call this process saw approved became ready (ms), until its delivery: bounded.
const approvedAt = new Map<string, number>()
const ApprovedCap = 10_000

/**
 * Counts one commit of a call, given its facts before and after: its events by type, the
 * verdicts among them, the outcome when the commit ended the call, and a held call's release
 * time, from the approval that made it ready (`readiness.changed` to satisfied after its 202) to
 * its result's delivery (`delivery.published`), both by the events' own times.
 */
export const countCommit = (events: ReadonlyArray<HeldEvent>, before: HeldCallFacts, after: HeldCallFacts): void => {
  for (const e of events) {
    kernelMetrics.eventsCommitted.inc({ type: e.type })
    if (e.type === "call.adjudicated") kernelMetrics.verdicts.inc({ verdict: e.verdict })
    else if (e.type === "readiness.changed" && e.readiness === "satisfied" && before.held && before.readiness !== "satisfied") {
      approvedAt.delete(e.held_id)
      approvedAt.set(e.held_id, Date.parse(e.at))
      if (approvedAt.size > ApprovedCap) approvedAt.delete(approvedAt.keys().next().value!)
    } else if (e.type === "delivery.published") {
      const at = approvedAt.get(e.held_id)
      if (at === undefined) continue
      approvedAt.delete(e.held_id)
      const seconds = (Date.parse(e.at) - at) / 1000
      if (Number.isFinite(seconds) && seconds >= 0) kernelMetrics.releaseSeconds.observe(seconds)
    }
  }
  if (before.outcome === null && after.outcome !== null) kernelMetrics.outcomes.inc({ outcome: after.outcome })
}
