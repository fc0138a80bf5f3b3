import { callDigest, contractDigest, jcsDigest } from "../../schema/Canonical.js"
import type { Decision, EventOf, HeldEvent, Reason, Verdict } from "../../schema/Events.js"
import type { HeldCallFacts } from "../../schema/Facts.js"
import type { JsonObject } from "../../schema/Json.js"
import type { WitnessContract } from "../../schema/WitnessContract.js"
import { atOf } from "../decide/Decision.js"
import { EventIds } from "../EventIds.js"

/** What adjudication (the policy's plugins, run by the drive) concluded about the current call. */
export interface Adjudged {
  readonly verdict: Verdict
  readonly reasons: ReadonlyArray<Reason>
  readonly contract?: WitnessContract
  readonly decisions: ReadonlyArray<Decision>
  /** The call that will run: differs from the proposal when a TRANSFORM applied. */
  readonly executed: { readonly tool: string; readonly args: JsonObject }
  /** The epoch of the policy that adjudged it. */
  readonly policyEpoch: number
  /** What witnesses are shown of the call to run as `generation` with digest `callDigest` (the policy's presentation, a pure function). */
  readonly present: (generation: number, callDigest: string) => JsonObject
}

/** A verdict's events, and the hold among them when the call parks for witnesses. */
export interface VerdictPlan {
  readonly events: ReadonlyArray<HeldEvent>
  readonly held: EventOf<"call.held"> | undefined
}

/**
 * The events that record a verdict on the current generation at `now`. A generation presents one
 * canonical call: when a re-adjudication changes it (a policy change made a transform produce
 * another call) the proposal is re-presented as the next generation, so witnesses are shown the
 * new call and no evidence about the old one counts. Witnesses are shown the call again
 * whenever what they would be shown changed.
 */
export const verdictEvents = (f: HeldCallFacts, a: Adjudged, now: number): VerdictPlan => {
  const spec = f.spec!
  const at = atOf({ now })
  const executedDigest = callDigest(a.executed.tool, a.executed.args)
  const transformed = executedDigest !== spec.call_digest
  const represent = f.executed !== null && f.executed.call_digest !== executedDigest
  const generation = represent ? f.generation + 1 : f.generation
  const base = { held_id: f.held_id, generation, at }
  const digest = a.contract ? contractDigest(a.contract) : undefined
  const events: Array<HeldEvent> = []
  if (represent) {
    events.push({ ...base, type: "call.represented", event_id: EventIds.represented(f.held_id, generation), from_call_digest: f.executed!.call_digest, call_digest: executedDigest, policy_epoch: a.policyEpoch })
  }
  events.push({
    ...base,
    type: "call.adjudicated",
    event_id: EventIds.adjudicated(f.held_id, generation, a.policyEpoch),
    verdict: a.verdict,
    reasons: a.reasons,
    policy_epoch: a.policyEpoch,
    ...(a.contract ? { witness_contract: a.contract, contract_digest: digest } : {}),
    ...(transformed ? { executed: { tool: a.executed.tool, args: a.executed.args, call_digest: executedDigest } } : {}),
    decisions: a.decisions
  })
  let held: EventOf<"call.held"> | undefined
  if (a.verdict === "REQUIRE_WITNESS" && a.contract) {
    const presentation = a.present(generation, executedDigest)
    const presentationDigest = jcsDigest(presentation)
    if (represent || !f.held || f.contract_digest !== digest || f.witness_request?.presentation_digest !== presentationDigest) {
      held = {
        ...base,
        type: "call.held",
        event_id: EventIds.held(f.held_id, generation, digest!, presentationDigest),
        witness_request: { contract: a.contract, contract_digest: digest!, presentation, presentation_digest: presentationDigest },
        expires_at: spec.expires_at
      }
      events.push(held)
    }
  }
  if (a.verdict === "DENY") events.push({ ...base, type: "call.denied", event_id: EventIds.denied(f.held_id, generation), reasons: a.reasons })
  return { events, held }
}
