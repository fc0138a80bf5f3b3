import type { Evidence, HeldCallFacts } from "../schema/Facts.js"
import type { JsonObject } from "../schema/Json.js"

/** Facts of a held call before any event. */
export const initialFacts = (heldId: string): HeldCallFacts => ({
  held_id: heldId,
  generation: 0,
  spec: null,
  lifecycle: "open",
  verdict: "pending",
  reasons: [],
  witness_contract: null,
  contract_digest: null,
  witness_request: null,
  executed: null,
  active_rule: null,
  held: false,
  evidence: [],
  readiness: "unsatisfied",
  policy_epoch: 0,
  policy_epoch_checked: 0,
  execution: "none",
  lease_owner: null,
  lease_until: null,
  dispatch_attempts: 0,
  needs_witness: false,
  effect: null,
  result_admission: "pending",
  result: null,
  quarantine: null,
  outcome: null,
  continuation_delivery: "none",
  delivery_id: null,
  delivery_attempts: 0,
  delivery_last_at: null,
  errors: [],
  seen: [],
  last_seq: 0
})

/** The canonical (post-transform) call of the current generation: what runs and what witnesses bind to. */
export const canonicalCall = (facts: HeldCallFacts): { readonly tool: string; readonly args: JsonObject; readonly call_digest: string } | null =>
  facts.executed ?? (facts.spec === null ? null : { tool: facts.spec.tool, args: facts.spec.args, call_digest: facts.spec.call_digest })

/** Evidence of the current generation, bound to the current canonical call and contract digests. */
export const currentEvidence = (facts: HeldCallFacts): ReadonlyArray<Evidence> =>
  facts.evidence.filter(
    (e) =>
      e.generation === facts.generation &&
      e.call_digest === canonicalCall(facts)?.call_digest &&
      e.contract_digest === facts.contract_digest
  )

/** True while no effect can have happened: cancel and edits are still allowed. */
export const beforeDispatch = (facts: HeldCallFacts): boolean =>
  facts.lifecycle === "open" && (facts.execution === "none" || facts.execution === "leased")

/**
 * An ended call with nothing left to happen: its delivery acknowledged, never owed, or stopped,
 * and (a nested call) its end reported to its parent. Such a call leaves the open-call index and
 * may be archived.
 */
export const quiescent = (f: HeldCallFacts): boolean =>
  f.outcome !== null &&
  (f.continuation_delivery === "none" || f.continuation_delivery === "acknowledged" || f.delivery_stopped_at !== undefined) &&
  (f.spec?.parent_held_id === undefined || f.parent_reported === true)

/**
 * A completed call with nothing left to do, ever: the effect is recorded, the result admitted
 * (or quarantined), no delivery is owed (none was, or it was acknowledged) and a nested call has
 * reported to its parent. No later event can give it work (an end is final, an edit after
 * dispatch is refused), so facts from any prefix of its log that are settled stay settled.
 */
export const settled = (f: HeldCallFacts): boolean =>
  f.lifecycle === "completed" &&
  f.execution === "effect-recorded" &&
  f.result_admission !== "pending" &&
  (f.continuation_delivery === "none" || f.continuation_delivery === "acknowledged") &&
  (f.spec?.parent_held_id === undefined || f.parent_reported === true)

/** The principals that edited a call so far (each a proposer of the generation it made). */
export const editorsOf = (spec: HeldCallFacts["spec"]): ReadonlyArray<string> =>
  spec?.edited_by === undefined ? [] : (spec.edited_by.editors ?? [spec.edited_by.witness])
