import { Context, type Effect } from "effect"
import type { Decision, Reason, Verdict } from "../schema/Events.js"
import type { JsonObject } from "../schema/Json.js"
import type { WitnessContract } from "../schema/WitnessContract.js"
import type { ActivePolicy } from "./ActivePolicy.js"

/** A proposal as the adjudicator sees it, after the kernel's capability floor. */
export interface Proposal {
  readonly principal: string
  readonly session_id: string
  readonly turn_id: string
  readonly call_id: string
  readonly tool: string
  readonly args: JsonObject
}

export interface AdjudicationInput {
  readonly proposal: Proposal
  readonly policy: ActivePolicy
  /** Kernel clock, ms since epoch (passed in so decisions can be replayed). */
  readonly now: number
  /** The call's merged disclosure preference, passed to witness-contract providers. */
  readonly disclosure?: "exact" | "redacted"
}

/** The folded decision: verdict, why, the witness contract when held, and the call to execute. */
export interface Adjudication {
  readonly verdict: Verdict
  readonly reasons: ReadonlyArray<Reason>
  readonly contract?: WitnessContract
  readonly decisions: ReadonlyArray<Decision>
  /** The call that will run: differs from the proposal when a TRANSFORM applied. */
  readonly executed: { readonly tool: string; readonly args: JsonObject }
  /**
   * How witnesses should be shown the call, from a witness-contract provider
   * (`{disclosure: "exact" | "redacted", summary?, args?}`); absent: the exact call.
   */
  readonly presentation?: JsonObject
}

/**
 * The policy seam: everything between the kernel floor and the verdict. The spine ships a
 * rule implementation read from the profile; the WASM plugin host provides the same tag.
 */
export class Adjudicator extends Context.Tag("wk/Adjudicator")<
  Adjudicator,
  { readonly adjudicate: (input: AdjudicationInput) => Effect.Effect<Adjudication> }
>() {}
