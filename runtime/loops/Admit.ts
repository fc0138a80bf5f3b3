import { Effect } from "effect"
import { HeldCallStore, type Loaded } from "../ledger/HeldCallStore.js"
import { Admission } from "../policy/Admission.js"
import type { ActivePolicy } from "../policy/ActivePolicy.js"
import type { ResultAdmitted, ResultQuarantined } from "../schema/Events.js"
import type { JsonValue } from "../schema/Json.js"
import { eventOf, progress } from "./Actions.js"
import { canonicalCall } from "../heldcall/Facts.js"

/** The `admit` action: result admission runs before any model can see the result. */
export const admit = (loaded: Loaded, policy: ActivePolicy) =>
  Effect.gen(function* () {
    const store = yield* HeldCallStore
    const admission = yield* Admission
    const f = loaded.facts
    const spec = f.spec!
    const effect = f.effect!
    const result: JsonValue = effect.ok ? (effect.result ?? null) : { error: effect.error ?? "tool failed" }
    const call = canonicalCall(f)!
    const a = yield* admission.admit({ principal: spec.principal, tool: call.tool, args: call.args, result, policy })
    const base = { held_id: f.held_id, generation: f.generation }
    yield* store.append(loaded, [
      a.admitted
        ? eventOf<typeof ResultAdmitted.Type>({ ...base, type: "result.admitted", event_id: `result.admitted:${f.held_id}:g${f.generation}`, result, decisions: a.decisions })
        : eventOf<typeof ResultQuarantined.Type>({ ...base, type: "result.quarantined", event_id: `result.quarantined:${f.held_id}:g${f.generation}`, by: a.by, reason: a.reason, decisions: a.decisions })
    ])
    return progress
  })
