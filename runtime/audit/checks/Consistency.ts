import type { HeldCallFacts } from "../../schema/Facts.js"
import { collector, type HeldCheck } from "./Check.js"

/**
 * Whether the facts hold the final no of `witness` for their current generation: its valid
 * reject, or a nested call it proposed (a witness provider's) that failed.
 */
const refusedBy = (f: HeldCallFacts, witness: string): boolean =>
  f.evidence.some((e) => e.witness === witness && e.generation === f.generation && e.status === "valid" && e.decision === "reject") ||
  (f.dependencies ?? []).some((d) => d.attached_by === witness && d.status !== "pending")

/**
 * `consistency`: every recorded step has the cause the kernel would only write it after, so an
 * event removed from a call's history leaves a step without its cause:
 * - an accepted attestation of a generation that was never held (`call.held` removed);
 * - a witnessed call denied in a witness's name without that witness's reject in its evidence
 *   (a compliance veto removed);
 * - a generation adjudicated REQUIRE_WITNESS and never held, unless denied at once;
 * - a result admitted or quarantined with no effect recorded before it (`effect.recorded`
 *   removed, or the admission moved before it);
 * - a delivery published before the call ended (`call.denied`, `result.admitted`,
 *   `result.quarantined` removed: a call completes only with its result admitted or quarantined);
 *   an acknowledgement of a delivery never published (`delivery.published` removed);
 * - at the end, once the call had `settleMs` to settle: a DENY verdict never denied, an effect
 *   whose result was never admitted, a dispatch with no outcome.
 * Removals these cannot see (a whole tail of a call) are the chain's to catch.
 */
export const consistency: HeldCheck = {
  name: "consistency",
  run: (call, ctx) => {
    const c = collector("consistency", call.heldId)
    const held = new Set<number>()
    const published = new Set<string>()
    /** Generation -> seq of its REQUIRE_WITNESS adjudication, until held or denied. */
    const awaitingHold = new Map<number, number>()
    let lastAdjudicated: number | undefined
    for (const { seq, event, before, fresh } of call.steps) {
      if (!fresh) continue
      c.count()
      switch (event.type) {
        case "call.adjudicated":
          if (event.verdict === "REQUIRE_WITNESS" && !held.has(event.generation)) {
            awaitingHold.set(event.generation, seq)
            lastAdjudicated = event.generation
          }
          continue
        case "call.held":
          held.add(event.generation)
          awaitingHold.delete(event.generation)
          break
        case "attestation.accepted":
        case "standing.applied":
          if (!held.has(event.generation)) c.fail([seq], `${event.type === "standing.applied" ? "standing approval" : "attestation"} by ${event.witness} accepted for generation ${event.generation}, which was never held (no call.held)`)
          break
        case "call.denied": {
          if (lastAdjudicated !== undefined) awaitingHold.delete(lastAdjudicated)
          if (before.verdict === "REQUIRE_WITNESS") {
            for (const r of event.reasons) {
              if (r.by === "kernel" || refusedBy(before, r.by)) continue
              c.fail([seq], `denied in the name of ${r.by} ("${r.reason}") although ${r.by} has no valid reject for generation ${before.generation} (a veto removed?)`)
            }
          }
          break
        }
        case "result.admitted":
        case "result.quarantined":
          if (before.execution !== "effect-recorded") c.fail([seq], `${event.type} with no effect recorded before it (execution was ${before.execution})`)
          break
        case "delivery.published":
          published.add(event.delivery_id)
          // A call completes only with its result admitted or quarantined: this covers both.
          if (before.outcome === null) c.fail([seq], `delivery ${event.delivery_id} published before the call ended`)
          break
        case "delivery.acknowledged":
          if (!published.has(event.delivery_id)) c.fail([seq], `delivery ${event.delivery_id} acknowledged but never published`)
          break
        default:
          break
      }
      lastAdjudicated = undefined
    }
    for (const [generation, seq] of awaitingHold) c.fail([seq], `generation ${generation} was adjudicated REQUIRE_WITNESS and never held (no call.held)`)
    const f = call.facts
    const last = call.steps.at(-1)
    if (last !== undefined && f.spec !== null) {
      const settled = Date.parse(last.event.at) <= ctx.newestAt - ctx.settleMs
      const owed =
        f.verdict === "DENY" && f.lifecycle === "open"
          ? "the verdict is DENY but the call was never denied (call.denied missing)"
          : f.execution === "effect-recorded" && f.result_admission === "pending"
            ? "its effect was recorded but its result was never admitted or quarantined"
            : f.execution === "dispatched"
              ? "it was dispatched and no outcome was ever recorded (effect.recorded missing)"
              : null
      if (owed !== null) {
        if (settled) c.fail([last.seq], owed)
        else c.unsure([last.seq], `${owed}, so far (still settling)`)
      }
    }
    return c.done()
  }
}
