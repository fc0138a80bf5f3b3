import { type Context, Effect } from "effect"
import type { Admission } from "../policy/Admission.js"
import type { ActivePolicy } from "../policy/ActivePolicy.js"
import type { HeldEvent } from "../schema/Events.js"
import type { HeldCallFacts } from "../schema/Facts.js"
import { canonicalCall } from "../heldcall/Facts.js"
import { admissionEvent, resultToAdmit } from "../heldcall/plan/Admission.js"

/**
 * The `admit` action: result admission (plugins in this process) runs before any model can see
 * the result; the core records its verdict (heldcall/plan/Admission.ts), committed with the
 * effect it admits.
 */
export const admit = (admission: Context.Tag.Service<typeof Admission>, f: HeldCallFacts, policy: ActivePolicy, now: number): Effect.Effect<HeldEvent> => {
  const call = canonicalCall(f)!
  return Effect.map(admission.admit({ principal: f.spec!.principal, tool: call.tool, args: call.args, result: resultToAdmit(f), policy }), (verdict) => admissionEvent(f, verdict, now))
}
