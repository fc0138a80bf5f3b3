import { Schema } from "effect"
import type { NatsConnection } from "@nats-io/transport-node"
import { evolve } from "../../runtime/heldcall/Reducer.js"
import { initialFacts } from "../../runtime/heldcall/Facts.js"
import { HeldEvent } from "../../runtime/schema/Events.js"
import { ArchiveSubject } from "../../runtime/schema/Archive.js"
import type { HeldCallFacts } from "../../runtime/schema/Facts.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import { readAll } from "../audit/support.js"

const decodeEvent = Schema.decodeUnknownSync(HeldEvent)

/** One held call as the log tells it. */
export interface CallOutcome {
  readonly tool: string
  /** The final lifecycle: completed, denied, cancelled, expired, or open. */
  readonly outcome: string
  /** How many times the call went from open to an end (exactly one is the promise). */
  readonly endings: number
  /** A plugin decision of this call recorded a fault (the plugin failed closed). */
  readonly failClosed: boolean
  /** When the call expires (ms since the epoch), and when its first end was recorded (null: open). */
  readonly expiresAt: number
  readonly endedAt: number | null
}

export interface StreamOutcomes {
  readonly calls: ReadonlyMap<string, CallOutcome>
  readonly open: ReadonlyArray<string>
}

/** Folds every held call in WK_EVENTS with the kernel's own reducer, counting how each ended. */
export const readOutcomes = async (nc: NatsConnection): Promise<StreamOutcomes> => {
  const facts = new Map<string, { f: HeldCallFacts; endings: number; failClosed: boolean; endedAt: number | null }>()
  for (const m of await readAll(nc)) {
    if (m.subject === Subjects.policyEvents || m.subject === ArchiveSubject) continue
    const event = decodeEvent(m.body)
    const cur = facts.get(event.held_id) ?? { f: initialFacts(event.held_id), endings: 0, failClosed: false, endedAt: null }
    const next = evolve(cur.f, { seq: m.seq, index: m.index, event })
    const ended = cur.f.lifecycle === "open" && next.lifecycle !== "open"
    const changedEnd = cur.f.lifecycle !== "open" && next.lifecycle !== cur.f.lifecycle
    const fault = event.type === "call.adjudicated" && event.decisions.some((d) => typeof (d.output as { fault?: unknown } | null)?.fault === "string")
    facts.set(event.held_id, { f: next, endings: cur.endings + (ended || changedEnd ? 1 : 0), failClosed: cur.failClosed || fault, endedAt: cur.endedAt ?? (ended ? Date.parse(event.at) : null) })
  }
  const calls = new Map<string, CallOutcome>()
  const open: Array<string> = []
  for (const [heldId, { f, endings, failClosed, endedAt }] of facts) {
    calls.set(heldId, { tool: f.spec?.tool ?? "?", outcome: f.lifecycle, endings, failClosed, expiresAt: f.spec === null ? Number.NaN : Date.parse(f.spec.expires_at), endedAt })
    if (f.lifecycle === "open") open.push(heldId)
  }
  return { calls, open }
}
