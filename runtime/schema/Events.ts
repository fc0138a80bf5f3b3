import { Schema } from "effect"
import { Envelope } from "./Envelope.js"
import { HeldCallSpec } from "./HeldCallSpec.js"
import { JsonObject, JsonValue } from "./Json.js"
import { WitnessContract, WitnessRule } from "./WitnessContract.js"
import { EvidenceRecord } from "./EvidenceTerm.js"

/** Fields every event carries. `event_id` is derived from the event's cause, so one cause is one event. */
const Base = {
  event_id: Schema.String,
  held_id: Schema.String,
  generation: Schema.Int,
  at: Schema.String
}

export const Verdict = Schema.Literal("ALLOW", "REQUIRE_WITNESS", "DENY")
export type Verdict = typeof Verdict.Type

export const Reason = Schema.Struct({ by: Schema.String, reason: Schema.String })
export type Reason = typeof Reason.Type

/** One policy decision as recorded for the auditor (plugin digest, input digest, output, host values). */
export const Decision = Schema.Struct({
  by: Schema.String,
  digest: Schema.optional(Schema.String),
  input_digest: Schema.optional(Schema.String),
  output: JsonValue,
  host_values: Schema.optional(Schema.Array(JsonValue))
})
export type Decision = typeof Decision.Type

export const WitnessRequest = Schema.Struct({
  contract: WitnessContract,
  contract_digest: Schema.String,
  presentation: JsonObject,
  /**
   * `sha256(JCS(presentation))`, lowercase hex like `call_digest`: what the witness was shown,
   * for an attestation to bind to. Absent in events of older kernels.
   */
  presentation_digest: Schema.optional(Schema.String)
})
export type WitnessRequest = typeof WitnessRequest.Type

export const CallProposed = Schema.Struct({
  ...Base,
  type: Schema.Literal("call.proposed"),
  // The generation's spec, as the facts keep it.
  ...HeldCallSpec.fields,
  envelope: Schema.optional(Envelope)
})

export const CallAdjudicated = Schema.Struct({
  ...Base,
  type: Schema.Literal("call.adjudicated"),
  verdict: Verdict,
  reasons: Schema.Array(Reason),
  policy_epoch: Schema.Int,
  witness_contract: Schema.optional(WitnessContract),
  contract_digest: Schema.optional(Schema.String),
  /** The call that will run, when a TRANSFORM replaced the proposal (absent: the proposal itself). */
  executed: Schema.optional(Schema.Struct({ tool: Schema.String, args: JsonObject, call_digest: Schema.String })),
  decisions: Schema.Array(Decision)
})

/**
 * A witness's edit, as the next generation: the same tool with the arguments the witness signed
 * (`envelope`), adjudicated from the start like any proposal; only an approval of its own digest
 * releases it. The agent sees who edited what in the delivery.
 */
export const CallEdited = Schema.Struct({
  ...Base,
  type: Schema.Literal("call.edited"),
  witness: Schema.String,
  class: Schema.String,
  tool: Schema.String,
  args: JsonObject,
  call_digest: Schema.String,
  /** The call digest of the generation the edit replaces. */
  from_call_digest: Schema.String,
  reason: Schema.optional(Schema.String),
  envelope: Envelope
})

/** A witness moved the call's expiry later (`envelope`: its signed extension). */
export const CallExtended = Schema.Struct({
  ...Base,
  type: Schema.Literal("call.extended"),
  witness: Schema.String,
  class: Schema.String,
  expires_at: Schema.String,
  from_expires_at: Schema.String,
  reason: Schema.optional(Schema.String),
  envelope: Envelope
})

/**
 * A witness's standing approval (StandingGrant.ts) applied to this generation: counts as that
 * witness's approval under `class` until the grant expires. `use` is its place in the grant's
 * uses; `envelope` is the signed grant.
 */
export const StandingApplied = Schema.Struct({
  ...Base,
  type: Schema.Literal("standing.applied"),
  witness: Schema.String,
  class: Schema.String,
  grant_id: Schema.String,
  grant_digest: Schema.String,
  use: Schema.Int,
  call_digest: Schema.String,
  contract_digest: Schema.String,
  issued_at: Schema.String,
  expires_at: Schema.String,
  envelope: Envelope
})

/** The witnesses were reminded that the call expires at `expires_at` (once per expiry). */
export const WitnessReminded = Schema.Struct({
  ...Base,
  type: Schema.Literal("witness.reminded"),
  expires_at: Schema.String
})

export const CallHeld = Schema.Struct({
  ...Base,
  type: Schema.Literal("call.held"),
  witness_request: WitnessRequest,
  expires_at: Schema.String
})

/**
 * The kernel re-presents the current proposal as a new generation because its canonical call
 * changed (a policy change made a transform produce another call): no evidence about the old
 * call can count, and witnesses are shown the new call (`call.held` of this generation).
 */
export const CallRepresented = Schema.Struct({
  ...Base,
  type: Schema.Literal("call.represented"),
  /** The canonical call digest the previous generation presented. */
  from_call_digest: Schema.String,
  /** The canonical call digest of this generation. */
  call_digest: Schema.String,
  policy_epoch: Schema.Int
})

export const CallDenied = Schema.Struct({ ...Base, type: Schema.Literal("call.denied"), reasons: Schema.Array(Reason) })

export const AttestationAccepted = Schema.Struct({
  ...Base,
  type: Schema.Literal("attestation.accepted"),
  witness: Schema.String,
  class: Schema.String,
  decision: Schema.Literal("approve", "reject", "revoke", "evidence"),
  attestation_digest: Schema.String,
  call_digest: Schema.String,
  contract_digest: Schema.String,
  issued_at: Schema.String,
  expires_at: Schema.String,
  nonce: Schema.String,
  evidence_digest: Schema.optional(Schema.String),
  /** What an `evidence` attestation read for a contract term, as signed. */
  evidence: Schema.optional(EvidenceRecord),
  /** The presentation the witness signed it was shown (absent: the witness did not bind one). */
  presentation_digest: Schema.optional(Schema.String),
  /** The witness's own reason, as signed. */
  reason: Schema.optional(Schema.String),
  envelope: Envelope
})

export const AttestationRejected = Schema.Struct({
  ...Base,
  type: Schema.Literal("attestation.rejected"),
  witness: Schema.String,
  class: Schema.String,
  disposition: Schema.Literal("stale", "invalid"),
  reason: Schema.String,
  attestation_digest: Schema.String,
  envelope: Envelope
})

export const PolicyEpochChanged = Schema.Struct({ ...Base, type: Schema.Literal("policy.epoch_changed"), policy_epoch: Schema.Int })

export const Readiness = Schema.Literal("unsatisfied", "satisfied", "stale")
export type Readiness = typeof Readiness.Type

export const ReadinessChanged = Schema.Struct({
  ...Base,
  type: Schema.Literal("readiness.changed"),
  readiness: Readiness,
  policy_epoch: Schema.Int
})

export const WitnessFallbackApplied = Schema.Struct({
  ...Base,
  type: Schema.Literal("witness.fallback_applied"),
  rule: WitnessRule
})

export const ExecutionLeased = Schema.Struct({
  ...Base,
  type: Schema.Literal("execution.leased"),
  owner: Schema.String,
  lease_until: Schema.String
})

export const EffectDispatched = Schema.Struct({
  ...Base,
  type: Schema.Literal("effect.dispatched"),
  idempotency_key: Schema.String,
  attempt: Schema.Int,
  owner: Schema.String,
  /** Absent in logs written before the claim carried its lease end. */
  lease_until: Schema.optional(Schema.String),
  policy_epoch: Schema.Int
})

export const EffectRecorded = Schema.Struct({
  ...Base,
  type: Schema.Literal("effect.recorded"),
  idempotency_key: Schema.String,
  ok: Schema.Boolean,
  result: Schema.optional(JsonValue),
  error: Schema.optional(Schema.String),
  via: Schema.Literal("dispatch", "readback")
})

export const EffectOutcomeUnknown = Schema.Struct({
  ...Base,
  type: Schema.Literal("effect.outcome_unknown"),
  idempotency_key: Schema.String,
  reason: Schema.String,
  /** True when read-back cannot settle it (the tool declares none, or it stayed unreachable until expiry): a witness or an admin must. */
  needs_witness: Schema.Boolean
})

/**
 * The request reached nobody (no tool service subscribed): no effect can have happened. The
 * call is dispatched again under the same key from `retry_at` (backoff), until it expires.
 */
export const EffectUnreached = Schema.Struct({
  ...Base,
  type: Schema.Literal("effect.unreached"),
  idempotency_key: Schema.String,
  attempt: Schema.Int,
  reason: Schema.String,
  retry_at: Schema.String
})

/**
 * A read-back asked while the outcome is unknown reached nobody (no tool service subscribed):
 * the tool is down, which says nothing about whether the effect happened. Read-back is asked
 * again from `retry_at` (backoff) until the call expires; after that a read-back witness or an
 * admin settles it.
 */
export const EffectReadbackUnreached = Schema.Struct({
  ...Base,
  type: Schema.Literal("effect.readback_unreached"),
  idempotency_key: Schema.String,
  attempt: Schema.Int,
  reason: Schema.String,
  retry_at: Schema.String
})

/**
 * An unknown outcome of a tool its rule declares idempotent that read-back did not settle (the
 * tool declares none, or nobody answered it): the request is sent again under the same
 * idempotency key (the tool applies it at most once).
 */
export const EffectResend = Schema.Struct({
  ...Base,
  type: Schema.Literal("effect.resend"),
  idempotency_key: Schema.String,
  reason: Schema.String
})

/** Who settled an unknown outcome: a read-back witness (named by the contract or the tool's rule) or a policy admin. */
export const SettleAuthority = Schema.Literal("witness", "admin")
export const SettleDecision = Schema.Literal("effect_happened", "no_effect")

/**
 * A signed read-back attestation (or an admin's determination) settling an unknown outcome:
 * `effect_happened` records the effect as applied (with the result the signer read back, if
 * any); `no_effect` records it as not applied (an error result). Either ends the call.
 */
export const EffectSettled = Schema.Struct({
  ...Base,
  type: Schema.Literal("effect.settled"),
  idempotency_key: Schema.String,
  by: Schema.String,
  authority: SettleAuthority,
  decision: SettleDecision,
  result: Schema.optional(JsonValue),
  reason: Schema.optional(Schema.String),
  attestation_digest: Schema.String,
  envelope: Envelope
})

export const EffectReadback = Schema.Struct({
  ...Base,
  type: Schema.Literal("effect.readback"),
  idempotency_key: Schema.String,
  applied: Schema.Boolean
})

export const ResultAdmitted = Schema.Struct({ ...Base, type: Schema.Literal("result.admitted"), result: JsonValue, decisions: Schema.Array(Decision) })
export const ResultQuarantined = Schema.Struct({
  ...Base,
  type: Schema.Literal("result.quarantined"),
  by: Schema.String,
  reason: Schema.String,
  decisions: Schema.Array(Decision)
})

export const DeliveryPublished = Schema.Struct({
  ...Base,
  type: Schema.Literal("delivery.published"),
  delivery_id: Schema.String,
  attempt: Schema.Int
})

export const DeliveryAcknowledged = Schema.Struct({
  ...Base,
  type: Schema.Literal("delivery.acknowledged"),
  delivery_id: Schema.String,
  envelope: Envelope
})

/**
 * The kernel stopped republishing an unacknowledged delivery: the call's expiry plus the delivery
 * grace period passed. The result stays readable (`held.get`, the session stream) and may still be
 * acknowledged; only the republishing ends.
 */
export const DeliveryStopped = Schema.Struct({
  ...Base,
  type: Schema.Literal("delivery.stopped"),
  delivery_id: Schema.String,
  /** Deliveries published before the stop. */
  attempts: Schema.Int,
  reason: Schema.String
})

export const CallCancelled = Schema.Struct({
  ...Base,
  type: Schema.Literal("call.cancelled"),
  by: Schema.String,
  reason: Schema.String,
  /** The signed cancel request; absent only when `by` is "kernel" (cancel_on_disconnect). */
  envelope: Schema.optional(Envelope)
})

/** `reasons`: why it never ran when that is known (the tool was unreachable until expiry). */
export const CallExpired = Schema.Struct({ ...Base, type: Schema.Literal("call.expired"), reasons: Schema.optional(Schema.Array(Reason)) })

/** On the parent: a nested held call it now waits for (proposed with `parent_held_id`). */
export const DependencyAdded = Schema.Struct({
  ...Base,
  type: Schema.Literal("dependency.added"),
  child_held_id: Schema.String,
  call_digest: Schema.String,
  principal: Schema.String,
  envelope: Schema.optional(Envelope)
})

/** On the parent: a dependency it waited for ended (`completed` releases it; any other end fails it closed). */
export const DependencyResolved = Schema.Struct({
  ...Base,
  type: Schema.Literal("dependency.resolved"),
  child_held_id: Schema.String,
  outcome: Schema.Literal("completed", "denied", "cancelled", "expired"),
  reasons: Schema.Array(Reason)
})

/** On the parent: a dependency edge the kernel refused (a cycle, or depth over the bound); the parent fails closed. */
export const DependencyRefused = Schema.Struct({
  ...Base,
  type: Schema.Literal("dependency.refused"),
  child_held_id: Schema.String,
  call_digest: Schema.String,
  reason: Schema.String,
  /** Who proposed the refused child (absent in older logs: read it from the envelope). */
  principal: Schema.optional(Schema.String),
  envelope: Schema.optional(Envelope)
})

/** On the child: its end was recorded on its parent (`dependency.resolved`), so nothing is left to report. */
export const DependencyReported = Schema.Struct({
  ...Base,
  type: Schema.Literal("dependency.reported"),
  parent_held_id: Schema.String
})

export const ReconcileBoundExceeded = Schema.Struct({
  ...Base,
  type: Schema.Literal("reconcile.bound_exceeded"),
  bound: Schema.Int
})

/** Every event of a held call, stored inside a commit (schema/Commit.ts) on `wk.v1.events.<held_id>` in `WK_EVENTS`. */
export const HeldEvent = Schema.Union(
  CallProposed,
  CallAdjudicated,
  CallHeld,
  CallRepresented,
  CallEdited,
  CallExtended,
  WitnessReminded,
  CallDenied,
  AttestationAccepted,
  AttestationRejected,
  StandingApplied,
  PolicyEpochChanged,
  ReadinessChanged,
  WitnessFallbackApplied,
  ExecutionLeased,
  EffectDispatched,
  EffectRecorded,
  EffectOutcomeUnknown,
  EffectReadback,
  EffectReadbackUnreached,
  EffectUnreached,
  EffectResend,
  EffectSettled,
  ResultAdmitted,
  ResultQuarantined,
  DeliveryPublished,
  DeliveryAcknowledged,
  DeliveryStopped,
  CallCancelled,
  CallExpired,
  DependencyAdded,
  DependencyResolved,
  DependencyRefused,
  DependencyReported,
  ReconcileBoundExceeded
)
export type HeldEvent = typeof HeldEvent.Type
export type EventType = HeldEvent["type"]
export type EventOf<T extends EventType> = Extract<HeldEvent, { type: T }>

/** An event as read back from the stream, with its address: the stream sequence of its commit and its index in that commit. */
export interface SequencedEvent {
  readonly seq: number
  readonly index: number
  readonly event: HeldEvent
}
