import { canonicalize } from "../../schema/Canonical.js"
import { collector, type HeldCheck } from "./Check.js"

/**
 * `delivery` (invariants 8 and 11): no delivery in the sessions stream carries the bytes of a
 * quarantined result (its `result` is null), every recorded `delivery.published` has its
 * message and every message its recorded `delivery.published`, and every held call (one that answered 202) that ended was delivered. A call that
 * ended less than `settleMs` before the newest event read is still settling: unverified.
 */
export const delivery: HeldCheck = {
  name: "delivery",
  run: (call, ctx) => {
    const c = collector("delivery", call.heldId)
    const f = call.facts
    const published = call.steps.filter((s) => s.event.type === "delivery.published")
    const messages = ctx.deliveries?.get(call.heldId) ?? []
    const quarantinedAt = call.steps.find((s) => s.event.type === "result.quarantined" && s.fresh)
    if (ctx.deliveries !== undefined) {
      const recordedIds = new Set(published.map((s) => (s.event.type === "delivery.published" ? s.event.delivery_id : "")))
      for (const m of messages) {
        c.count()
        // A delivery the log does not record. The kernel publishes first and records after, so a
        // message that says what the call ended with may be one whose record is still on its way
        // (or whose kernel died in between: the next drive publishes it again and records it) while
        // the call is still settling; past that, or saying anything else, its record was removed.
        if (!recordedIds.has(m.delivery_id)) {
          const admission = f.outcome === "completed" ? f.result_admission : null
          const matches = f.outcome !== null && (m.outcome ?? null) === f.outcome && (m.admission ?? null) === admission
          if (m.time !== undefined && ctx.eventsReadAt !== undefined && m.time > ctx.eventsReadAt) c.unsure([], `delivery ${m.delivery_id} (WK_SESSIONS seq ${m.seq}) was stored after the events were read: its call's later steps are not in this replay`)
          else if (matches && endedAt(call) > ctx.newestAt - ctx.settleMs) c.unsure([], `delivery ${m.delivery_id} (WK_SESSIONS seq ${m.seq}) says what the call ended with but its delivery.published is not recorded (in flight, or its kernel stopped between publishing and recording)`)
          else c.fail([], `delivery ${m.delivery_id} (WK_SESSIONS seq ${m.seq}) has no delivery.published in the call's history (it says ${m.outcome ?? "no outcome"}/${m.admission ?? "-"}; the history: ${f.outcome ?? "not ended"}/${admission ?? "-"})`)
        }
        if (quarantinedAt !== undefined && m.result !== null && m.result !== undefined) {
          c.fail([quarantinedAt.seq], `a quarantined result reached delivery ${m.delivery_id} (WK_SESSIONS seq ${m.seq}) with its bytes`)
        } else if (m.admission === "quarantined" && m.result !== null && m.result !== undefined) {
          c.fail([], `delivery ${m.delivery_id} (WK_SESSIONS seq ${m.seq}) is marked quarantined but carries a result`)
        } else if (f.result_admission === "admitted" && m.admission === "admitted" && canonicalize(m.result ?? null) !== canonicalize(f.result ?? null)) {
          c.fail([], `delivery ${m.delivery_id} (WK_SESSIONS seq ${m.seq}) carries another result than the one admitted`)
        }
      }
      for (const s of published) {
        const id = s.event.type === "delivery.published" ? s.event.delivery_id : ""
        if (messages.some((m) => m.delivery_id === id)) continue
        if (ctx.deliveriesFrom !== undefined && Date.parse(s.event.at) < ctx.deliveriesFrom) c.unsure([s.seq], `delivery ${id} was published before the oldest message the sessions stream still holds (aged out by its limits)`)
        else c.fail([s.seq], `delivery ${id} is recorded as published but has no message in the sessions stream`)
      }
    }
    if (f.held && f.outcome !== null) {
      c.count()
      if (published.length === 0 && messages.length === 0) {
        const ended = call.steps.find((s) => s.after.outcome !== null && s.before.outcome === null)
        const at = ended ? Date.parse(ended.event.at) : 0
        const seqs = ended ? [ended.seq] : []
        if (at > ctx.newestAt - ctx.settleMs) c.unsure(seqs, `ended (${f.outcome}) at ${ended?.event.at}; delivery may still be on its way`)
        else c.fail(seqs, `held call ended (${f.outcome}) and was never delivered to session ${f.spec?.session_id}`)
      }
    }
    return c.done()
  }
}

/** When the call ended (its first step with an outcome), or 0. */
const endedAt = (call: Parameters<HeldCheck["run"]>[0]): number => {
  const ended = call.steps.find((s) => s.after.outcome !== null && s.before.outcome === null)
  return ended ? Date.parse(ended.event.at) : 0
}
