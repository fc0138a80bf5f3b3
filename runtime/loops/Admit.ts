import { type Context, Effect } from "effect"
import { EventIds } from "../heldcall/EventIds.js"
import type { Admission } from "../policy/Admission.js"
import type { ActivePolicy } from "../policy/ActivePolicy.js"
import type { HeldEvent, ResultAdmitted, ResultQuarantined } from "../schema/Events.js"
import type { HeldCallFacts } from "../schema/Facts.js"
import type { JsonValue } from "../schema/Json.js"
import { eventOf } from "./Actions.js"
import { canonicalCall } from "../heldcall/Facts.js"

/**
 * The `admit` action, in memory: result admission (plugins in this process) runs before any
 * model can see the result; its event is committed with the effect it admits.
 */
export const admit = (admission: Context.Tag.Service<typeof Admission>, f: HeldCallFacts, policy: ActivePolicy): Effect.Effect<HeldEvent> => {
  const spec = f.spec!
  const effect = f.effect!
  const result: JsonValue = effect.ok ? (effect.result ?? null) : { error: effect.error ?? "tool failed" }
  const call = canonicalCall(f)!
  const base = { held_id: f.held_id, generation: f.generation }
  return Effect.map(admission.admit({ principal: spec.principal, tool: call.tool, args: call.args, result, policy }), (a): HeldEvent =>
    a.admitted
      ? eventOf<typeof ResultAdmitted.Type>({ ...base, type: "result.admitted", event_id: EventIds.resultAdmitted(f.held_id, f.generation), result, decisions: a.decisions })
      : eventOf<typeof ResultQuarantined.Type>({ ...base, type: "result.quarantined", event_id: EventIds.resultQuarantined(f.held_id, f.generation), by: a.by, reason: a.reason, decisions: a.decisions })
  )
}
