import { Effect } from "effect"
import type { Preferences } from "../schema/Preferences.js"
import { registryOf, type ActivePolicy } from "./ActivePolicy.js"
import { Adjudicator, type Adjudication, type Proposal } from "./Adjudicator.js"
import { floorRefusal } from "./KernelFloor.js"
import { adjudicatePolicyChange, PolicyApplyTool } from "./PolicyChange.js"
import { applyPreferences, effectivePreferences } from "./Preferences.js"
import { joinContracts, type WitnessContract } from "../schema/WitnessContract.js"
import { DefaultContract } from "./RuleAdjudicator.js"

/** What the kernel decides a call on: who proposes which tool with which arguments, and its preferences. */
export interface CallToDecide extends Proposal {
  readonly preferences?: Preferences | undefined
  /** Set when a witness edited the call: the contract it was held with when edited. */
  readonly edited_by?: { readonly contract?: WitnessContract | undefined } | undefined
}

/**
 * The kernel's decision on one call: the kernel floor, then the adjudicator, then per-call
 * preferences (which only narrow). A principal with no grant for the tool is denied before any
 * policy runs. The kernel's adjudicate action and `wk policy eval` both decide with this.
 */
export const decideCall = (spec: CallToDecide, policy: ActivePolicy, now: number) =>
  Effect.gen(function* () {
    // A policy change is decided by the kernel floor alone: no plugin decides its own widening.
    if (spec.tool === PolicyApplyTool) return adjudicatePolicyChange(policy, spec.principal, spec.args)
    const refused = floorRefusal(policy, spec.principal, spec.tool)
    if (refused !== undefined) return floorDenial(refused, { tool: spec.tool, args: spec.args })
    const adjudicator = yield* Adjudicator
    const prefs = effectivePreferences(policy, spec.principal, spec.preferences)
    const a = yield* adjudicator.adjudicate({
      proposal: { principal: spec.principal, session_id: spec.session_id, turn_id: spec.turn_id, call_id: spec.call_id, tool: spec.tool, args: spec.args },
      policy,
      now,
      ...(prefs.disclosure !== undefined ? { disclosure: prefs.disclosure } : {})
    })
    // Whatever the adjudicator replaced the call with passes the floor too (any seam, not only plugins).
    const replaced = a.executed.tool !== spec.tool ? floorRefusal(policy, spec.principal, a.executed.tool) : undefined
    if (replaced !== undefined) return floorDenial(`the call was replaced with ${a.executed.tool}: ${replaced}`, a.executed, a.decisions)
    return editedCallDecision(spec, applyPreferences(a, prefs, spec, registryOf(policy)))
  })

/**
 * An edited call is a new proposal by its editor: it never runs on an ALLOW alone. Whatever its
 * new arguments would get on their own (a DENY stays a DENY), it waits for the contract it was
 * held with, joined with any contract its arguments need.
 */
export const editedCallDecision = (spec: CallToDecide, a: Adjudication): Adjudication => {
  const kept = spec.edited_by?.contract
  if (spec.edited_by === undefined || a.verdict === "DENY") return a
  // An edit always follows a hold; a record without the kept contract falls back to the default one.
  const held = kept ?? DefaultContract
  const contract = a.verdict === "REQUIRE_WITNESS" && a.contract !== undefined ? joinContracts(held, a.contract) : held
  const reasons = a.verdict === "REQUIRE_WITNESS" ? a.reasons : [...a.reasons, { by: "kernel", reason: "an edited call is released only by the contract it was held with" }]
  return { ...a, verdict: "REQUIRE_WITNESS", reasons, contract, decisions: [...a.decisions, { by: "kernel:edited", output: "REQUIRE_WITNESS" }] }
}

/** The kernel floor's DENY, after whatever decisions led to it. */
const floorDenial = (reason: string, executed: Adjudication["executed"], decisions: Adjudication["decisions"] = []): Adjudication => ({
  verdict: "DENY",
  reasons: [{ by: "kernel", reason }],
  decisions: [...decisions, { by: "kernel:floor", output: "DENY" }],
  executed
})
