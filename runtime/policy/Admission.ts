import { Context, Effect, Layer } from "effect"
import type { Decision } from "../schema/Events.js"
import type { JsonValue } from "../schema/Json.js"
import type { ActivePolicy } from "./ActivePolicy.js"

export interface AdmissionInput {
  readonly principal: string
  readonly tool: string
  readonly args: JsonValue
  readonly result: JsonValue
  readonly policy: ActivePolicy
}

/** Admitted results reach the model; quarantined bytes never do. */
export type AdmissionOutcome =
  | { readonly admitted: true; readonly decisions: ReadonlyArray<Decision> }
  | { readonly admitted: false; readonly by: string; readonly reason: string; readonly decisions: ReadonlyArray<Decision> }

/** Result admission seam: the admission plugins the policy pins provide it. */
export class Admission extends Context.Tag("wk/Admission")<
  Admission,
  { readonly admit: (input: AdmissionInput) => Effect.Effect<AdmissionOutcome> }
>() {}

/** Admits everything: the spine's default until admission plugins are configured. */
export const layerAdmitAll = Layer.succeed(Admission, { admit: () => Effect.succeed({ admitted: true as const, decisions: [] }) })
