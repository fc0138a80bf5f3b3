import { Effect } from "effect"
import { HeldCallStore, type Loaded } from "../ledger/HeldCallStore.js"
import { Admission } from "../policy/Admission.js"
import type { ActivePolicy } from "../policy/ActivePolicy.js"
import type { ResultAdmitted, ResultQuarantined } from "../schema/Events.js"
import type { JsonValue } from "../schema/Json.js"
import { eventOf, progress } from "./Actions.js"
import { canonicalCall } from "../heldcall/Facts.js"
import type { HeldCallFacts } from "../schema/Facts.js"
import type { Prejudged } from "./Prejudged.js"

/** What admission is shown of an effect: its result, or the tool's error as `{error}`. */
export const admittedValue = (effect: { readonly ok: boolean; readonly result?: JsonValue | undefined; readonly error?: string | undefined }): JsonValue =>
  effect.ok ? (effect.result ?? null) : { error: effect.error ?? "tool failed" }

/** Runs result admission for the effect `effect` of the call `f`. */
export const admissionOf = (f: HeldCallFacts, effect: Parameters<typeof admittedValue>[0], policy: ActivePolicy) =>
  Effect.flatMap(Admission, (admission) => {
    const call = canonicalCall(f)!
    return admission.admit({ principal: f.spec!.principal, tool: call.tool, args: call.args, result: admittedValue(effect), policy })
  })

/** The `admit` action: result admission runs before any model can see the result. */
export const admit = (loaded: Loaded, policy: ActivePolicy, prejudged?: Prejudged["admission"]) =>
  Effect.gen(function* () {
    const store = yield* HeldCallStore
    const f = loaded.facts
    const effect = f.effect!
    const result = admittedValue(effect)
    const a = prejudged !== undefined && prejudged.generation === f.generation && prejudged.epoch === policy.epoch ? prejudged.value : yield* admissionOf(f, effect, policy)
    const base = { held_id: f.held_id, generation: f.generation }
    yield* store.append(loaded, [
      a.admitted
        ? eventOf<typeof ResultAdmitted.Type>({ ...base, type: "result.admitted", event_id: `result.admitted:${f.held_id}:g${f.generation}`, result, decisions: a.decisions })
        : eventOf<typeof ResultQuarantined.Type>({ ...base, type: "result.quarantined", event_id: `result.quarantined:${f.held_id}:g${f.generation}`, by: a.by, reason: a.reason, decisions: a.decisions })
    ])
    return progress
  })
