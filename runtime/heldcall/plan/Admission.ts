import type { Decision, HeldEvent } from "../../schema/Events.js"
import type { HeldCallFacts } from "../../schema/Facts.js"
import type { JsonValue } from "../../schema/Json.js"
import { atOf } from "../decide/Decision.js"
import { EventIds } from "../EventIds.js"

/** What result admission (plugins, run by the drive) said about a recorded effect. */
export type AdmissionVerdict =
  | { readonly admitted: true; readonly decisions: ReadonlyArray<Decision> }
  | { readonly admitted: false; readonly by: string; readonly reason: string; readonly decisions: ReadonlyArray<Decision> }

/** The result admission judges: the tool's result, or its failure as `{error}`. */
export const resultToAdmit = (f: HeldCallFacts): JsonValue => (f.effect!.ok ? (f.effect!.result ?? null) : { error: f.effect!.error ?? "tool failed" })

/** The event that records admission's verdict on the current generation's result. */
export const admissionEvent = (f: HeldCallFacts, verdict: AdmissionVerdict, now: number): HeldEvent => {
  const base = { held_id: f.held_id, generation: f.generation, at: atOf({ now }) }
  return verdict.admitted
    ? { ...base, type: "result.admitted", event_id: EventIds.resultAdmitted(f.held_id, f.generation), result: resultToAdmit(f), decisions: verdict.decisions }
    : { ...base, type: "result.quarantined", event_id: EventIds.resultQuarantined(f.held_id, f.generation), by: verdict.by, reason: verdict.reason, decisions: verdict.decisions }
}
