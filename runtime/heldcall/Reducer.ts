import type { HeldEvent, SequencedEvent } from "../schema/Events.js"
import type { Evidence, HeldCallFacts } from "../schema/Facts.js"
import { beforeDispatch, editorsOf, initialFacts } from "./Facts.js"
import { openDependencies, withDependency } from "./Dependencies.js"
import { joinContracts, type WitnessContract } from "../schema/WitnessContract.js"

/**
 * Folds one event into the facts. Pure: time and ids arrive inside the event. An event id
 * already folded leaves the facts unchanged (the reducer is the append-once guarantee).
 */
/** What a new generation starts from: no verdict, contract or presentation yet; a ready call must be re-judged. */
// The contract an edited call keeps: the one it was held with, joined with any an earlier edit kept.
const editedContract = (f: HeldCallFacts): { contract?: WitnessContract } => {
  const kept = f.spec?.edited_by?.contract
  const held = f.witness_contract ?? undefined
  const contract = kept === undefined ? held : held === undefined ? kept : joinContracts(kept, held)
  return contract === undefined ? {} : { contract }
}

const generationStart = (f: HeldCallFacts) =>
  ({
    verdict: "pending",
    reasons: [],
    witness_contract: null,
    contract_digest: null,
    witness_request: null,
    executed: null,
    active_rule: null,
    readiness: f.readiness === "satisfied" ? "stale" : f.readiness,
    policy_epoch_checked: 0
  }) satisfies Partial<HeldCallFacts>

export const evolve = (facts: HeldCallFacts, { seq, event }: SequencedEvent): HeldCallFacts => {
  if (hasSeen(facts, event.event_id)) return facts.last_seq >= seq ? facts : { ...facts, last_seq: seq }
  const next = apply(facts, event)
  return { ...next, seen: insertSorted(facts.seen, event.event_id), last_seq: Math.max(facts.last_seq, seq) }
}

/** `reduce(events) -> facts`. */
export const reduce = (heldId: string, events: Iterable<SequencedEvent>, from?: HeldCallFacts): HeldCallFacts => {
  let facts = from ?? initialFacts(heldId)
  for (const e of events) facts = evolve(facts, e)
  return facts
}

/** `facts` with uncommitted `events` folded in, on the same committed sequence (a view of work not yet committed). */
export const foldUncommitted = (facts: HeldCallFacts, events: ReadonlyArray<HeldEvent>): HeldCallFacts => {
  let f = facts
  events.forEach((event, index) => (f = evolve(f, { seq: facts.last_seq, index, event })))
  return f
}

const apply = (f: HeldCallFacts, e: HeldEvent): HeldCallFacts => {
  switch (e.type) {
    case "call.proposed": {
      // A later generation is an edit; an older one arriving late changes nothing.
      if (e.generation <= f.generation) return f
      const { principal, session_id, turn_id, call_id, tool, args, call_digest, continuation_ref, continuation_digest, preferences, idempotency_key, created_at, expires_at, parent_held_id, ancestors } = e
      // A proposal's generation is its own (no `proposed_generation`: only re-presentations set it).
      const { proposed_generation: _previous, ...rest } = f
      const replaced = f.spec !== null && f.spec.call_digest !== call_digest && !(f.earlier_digests ?? []).includes(f.spec.call_digest) ? [f.spec.call_digest] : []
      return {
        ...rest,
        ...(replaced.length > 0 ? { earlier_digests: [...(f.earlier_digests ?? []), ...replaced] } : {}),
        generation: e.generation,
        spec: {
          principal, session_id, turn_id, call_id, tool, args, call_digest, continuation_ref, continuation_digest, preferences, idempotency_key, created_at, expires_at,
          ...(parent_held_id !== undefined ? { parent_held_id } : {}),
          ...(ancestors !== undefined ? { ancestors } : {})
        },
        ...generationStart(f)
      }
    }
    case "call.adjudicated": {
      if (e.generation !== f.generation || e.policy_epoch < f.policy_epoch_checked) return f
      const contract = e.witness_contract ?? null
      return {
        ...f,
        verdict: e.verdict,
        reasons: e.reasons,
        // A call waiting on nested held calls is not ready until they end (the reconciler re-derives it).
        readiness: e.verdict === "ALLOW" && openDependencies(f).length === 0 ? "satisfied" : f.readiness,
        witness_contract: contract,
        contract_digest: e.contract_digest ?? null,
        executed: e.executed ?? (f.spec === null ? null : { tool: f.spec.tool, args: f.spec.args, call_digest: f.spec.call_digest }),
        active_rule: contract && f.contract_digest === (e.contract_digest ?? null) && f.active_rule ? f.active_rule : contract?.rule ?? null,
        policy_epoch: Math.max(f.policy_epoch, e.policy_epoch),
        policy_epoch_checked: e.policy_epoch
      }
    }
    case "call.edited": {
      // A witness's edit: the next generation of the same call with the signed arguments.
      if (e.generation !== f.generation + 1 || f.spec === null || !beforeDispatch(f)) return f
      const { proposed_generation: _previous, ...rest } = f
      const replaced = f.spec.call_digest !== e.call_digest && !(f.earlier_digests ?? []).includes(f.spec.call_digest) ? [f.spec.call_digest] : []
      return {
        ...rest,
        ...(replaced.length > 0 ? { earlier_digests: [...(f.earlier_digests ?? []), ...replaced] } : {}),
        generation: e.generation,
        spec: {
          ...f.spec,
          args: e.args,
          call_digest: e.call_digest,
          idempotency_key: `${f.held_id}:g${e.generation}`,
          edited_by: {
            witness: e.witness,
            class: e.class,
            from_call_digest: e.from_call_digest,
            ...(e.reason !== undefined ? { reason: e.reason } : {}),
            editors: [...new Set([...editorsOf(f.spec), e.witness])],
            ...editedContract(f)
          }
        },
        ...generationStart(f)
      }
    }
    case "call.extended":
      if (e.generation !== f.generation || f.spec === null || f.lifecycle !== "open") return f
      return { ...f, spec: { ...f.spec, expires_at: e.expires_at } }
    case "witness.reminded":
      return { ...f, reminded_for: e.expires_at }
    case "call.represented":
      // The same proposal, presented as the next generation: verdict, contract and evidence start over.
      if (e.generation !== f.generation + 1 || f.spec === null || !beforeDispatch(f)) return f
      return {
        ...f,
        generation: e.generation,
        proposed_generation: f.proposed_generation ?? f.generation,
        ...generationStart(f)
      }
    case "call.held":
      return e.generation === f.generation ? { ...f, held: true, witness_request: e.witness_request } : f
    case "call.denied":
      return end(f, "denied", { reasons: e.reasons.length > 0 ? e.reasons : f.reasons })
    case "attestation.accepted":
      return withEvidence(f, {
        witness: e.witness,
        class: e.class,
        decision: e.decision,
        status: "valid",
        generation: e.generation,
        call_digest: e.call_digest,
        contract_digest: e.contract_digest,
        attestation_digest: e.attestation_digest,
        issued_at: e.issued_at,
        expires_at: e.expires_at,
        nonce: e.nonce,
        key: e.envelope.key,
        ...(e.presentation_digest !== undefined ? { presentation_digest: e.presentation_digest } : {}),
        ...(e.evidence !== undefined ? { record: e.evidence } : {}),
        ...(e.reason !== undefined ? { reason: e.reason } : {})
      })
    case "standing.applied":
      return withEvidence(f, {
        witness: e.witness,
        class: e.class,
        decision: "approve",
        status: "valid",
        generation: e.generation,
        call_digest: e.call_digest,
        contract_digest: e.contract_digest,
        attestation_digest: e.grant_digest,
        issued_at: e.issued_at,
        expires_at: e.expires_at,
        nonce: `standing:${e.grant_id}`,
        key: e.envelope.key,
        standing: e.grant_id
      })
    case "attestation.rejected": {
      const payload = e.envelope.payload
      return withEvidence(f, {
        witness: e.witness,
        class: e.class,
        decision: decisionOf(payload["decision"]),
        status: "rejected",
        reason: `${e.disposition}: ${e.reason}`,
        generation: e.generation,
        call_digest: String(payload["call_digest"] ?? ""),
        contract_digest: String(payload["contract_digest"] ?? ""),
        attestation_digest: e.attestation_digest,
        issued_at: String(payload["issued_at"] ?? e.at),
        expires_at: String(payload["expires_at"] ?? e.at),
        nonce: String(payload["nonce"] ?? ""),
        key: e.envelope.key
      })
    }
    case "policy.epoch_changed":
      if (e.policy_epoch <= f.policy_epoch) return f
      // Readiness goes stale through the reconciler (a recorded readiness.changed), not implicitly.
      return { ...f, policy_epoch: e.policy_epoch }
    case "readiness.changed":
      if (e.generation !== f.generation || f.lifecycle !== "open") return f
      return { ...f, readiness: e.readiness }
    case "witness.fallback_applied":
      return e.generation === f.generation ? { ...f, active_rule: e.rule } : f
    case "execution.leased":
      return (f.execution === "none" || f.execution === "leased") && e.generation === f.generation ? { ...f, execution: "leased", lease_owner: e.owner, lease_until: e.lease_until } : f
    case "effect.dispatched": {
      if (f.execution === "effect-recorded") return f
      const { resend: _resend, readback_unreached: _readbackUnreached, ...rest } = f
      return { ...rest, execution: "dispatched", lease_owner: e.owner, lease_until: e.lease_until ?? null, dispatch_attempts: Math.max(f.dispatch_attempts, e.attempt), needs_witness: false }
    }
    case "effect.unreached":
      // Nobody received the request: no effect, so the call is back to not dispatched.
      if (f.execution !== "dispatched" && f.execution !== "leased") return f
      return { ...f, execution: "none", lease_owner: null, lease_until: null, unreached: { attempts: (f.unreached?.attempts ?? 0) + 1, reason: e.reason, retry_at: e.retry_at } }
    case "effect.resend":
      if (f.execution !== "outcome-unknown") return f
      return { ...f, execution: "none", lease_owner: null, lease_until: null, needs_witness: false, resend: true }
    case "effect.settled":
      if (f.execution !== "outcome-unknown") return f
      return {
        ...f,
        execution: "effect-recorded",
        effect:
          e.decision === "effect_happened"
            ? { ok: true, result: e.result ?? null, via: `settled:${e.authority}` }
            : { ok: false, error: `the effect did not happen (${e.authority} ${e.by}${e.reason !== undefined ? `: ${e.reason}` : ""})`, via: `settled:${e.authority}` },
        needs_witness: false
      }
    case "effect.outcome_unknown":
      if (f.execution === "effect-recorded") return f
      return { ...f, execution: "outcome-unknown", needs_witness: e.needs_witness }
    case "effect.readback_unreached":
      // The tool is down: still unknown, and read-back is asked again from retry_at.
      if (f.execution !== "outcome-unknown") return f
      return { ...f, readback_unreached: { attempts: (f.readback_unreached?.attempts ?? 0) + 1, reason: e.reason, retry_at: e.retry_at } }
    case "effect.readback": {
      // Not applied: the effect is known absent, and may be dispatched again under the same key.
      if (f.execution === "effect-recorded" || e.applied) return f
      const { readback_unreached: _readbackUnreached, ...rest } = f
      return { ...rest, execution: "none", lease_owner: null, lease_until: null }
    }
    case "effect.recorded":
      if (f.execution === "effect-recorded") return f
      return {
        ...f,
        execution: "effect-recorded",
        effect: { ok: e.ok, result: e.result, error: e.error, via: e.via },
        needs_witness: false
      }
    case "result.admitted":
      if (f.result_admission !== "pending") return f
      return end({ ...f, result_admission: "admitted", result: e.result }, "completed")
    case "result.quarantined":
      if (f.result_admission !== "pending") return f
      return end({ ...f, result_admission: "quarantined", result: null, quarantine: { by: e.by, reason: e.reason } }, "completed")
    case "delivery.published":
      if (e.attempt <= f.delivery_attempts) return f
      return {
        ...f,
        continuation_delivery: f.continuation_delivery === "acknowledged" ? "acknowledged" : "delivered",
        delivery_id: e.delivery_id,
        delivery_attempts: e.attempt,
        delivery_last_at: e.at
      }
    case "delivery.acknowledged":
      return { ...f, continuation_delivery: "acknowledged", delivery_id: e.delivery_id }
    case "delivery.stopped":
      return f.delivery_stopped_at !== undefined ? f : { ...f, delivery_stopped_at: e.at }
    case "call.cancelled":
      return f.execution === "none" || f.execution === "leased" ? end(f, "cancelled", { reasons: [{ by: e.by, reason: e.reason }] }) : f
    case "call.expired":
      return f.execution === "none" || f.execution === "leased" ? end(f, "expired", e.reasons !== undefined && e.reasons.length > 0 ? { reasons: e.reasons } : {}) : f
    case "dependency.added":
      return { ...f, dependencies: withDependency(f.dependencies, { held_id: e.child_held_id, status: "pending", attached_by: e.principal, generation: e.generation }) }
    case "dependency.resolved":
      return {
        ...f,
        dependencies: withDependency(f.dependencies, {
          held_id: e.child_held_id,
          status: "resolved",
          outcome: e.outcome,
          ...(e.outcome !== "completed" && e.reasons[0] !== undefined ? { reason: e.reasons[0].reason } : {})
        })
      }
    case "dependency.refused": {
      const by = e.principal ?? e.envelope?.payload["principal"]
      return {
        ...f,
        dependencies: withDependency(f.dependencies, {
          held_id: e.child_held_id,
          status: "refused",
          reason: e.reason,
          ...(typeof by === "string" ? { attached_by: by } : {}),
          generation: e.generation
        })
      }
    }
    case "dependency.reported":
      return { ...f, parent_reported: true }
    case "reconcile.bound_exceeded":
      return { ...f, errors: [...f.errors, `reconcile bound ${e.bound} exceeded at generation ${e.generation}`] }
    default:
      return f
  }
}

/** Ends an open call. The first end wins; a late end changes nothing. */
const end = (f: HeldCallFacts, outcome: NonNullable<HeldCallFacts["outcome"]>, extra: Partial<HeldCallFacts> = {}): HeldCallFacts => {
  if (f.outcome !== null) return f
  return {
    ...f,
    ...extra,
    lifecycle: outcome,
    outcome,
    // Held calls, and calls proposed with `wait: background`, answer through the session.
    continuation_delivery: (f.held || f.spec?.preferences?.wait?.mode === "background") && f.continuation_delivery === "none" ? "pending" : f.continuation_delivery
  }
}

const decisionOf = (d: unknown): Evidence["decision"] =>
  d === "approve" || d === "reject" || d === "revoke" || d === "evidence" ? d : "evidence"

/**
 * Adds a statement and re-derives revocation: a witness's revoke withdraws that witness's
 * approvals and evidence of the same generation, whatever `issued_at` either claims (a claimed
 * time is the witness's word, so it cannot shield an approval from its revoke). A reject is final:
 * no revoke withdraws it. Kept sorted so arrival order is irrelevant.
 */
const withEvidence = (f: HeldCallFacts, item: Evidence): HeldCallFacts => {
  const all = [...f.evidence.map(unrevoke), item].sort(compareEvidence)
  const revoked = new Set(all.filter((e) => e.status === "valid" && e.decision === "revoke").map((e) => `${e.witness}\u0000${e.generation}`))
  const evidence = all.map((e) =>
    e.status === "valid" && (e.decision === "approve" || e.decision === "evidence") && revoked.has(`${e.witness}\u0000${e.generation}`) ? { ...e, status: "revoked" as const } : e
  )
  // A held call whose readiness rested on withdrawn evidence is re-derived by the reconciler.
  return { ...f, evidence }
}

const unrevoke = (e: Evidence): Evidence => (e.status === "revoked" ? { ...e, status: "valid" } : e)

/** RFC 3339 times compare as instants, not strings ("…:00.5Z" is after "…:00Z"). */
const timeOf = (t: string): number => {
  const ms = Date.parse(t)
  return Number.isNaN(ms) ? 0 : ms
}

const compareEvidence = (a: Evidence, b: Evidence): number =>
  timeOf(a.issued_at) - timeOf(b.issued_at) || (a.attestation_digest < b.attestation_digest ? -1 : a.attestation_digest > b.attestation_digest ? 1 : 0)

const hasSeen = (f: HeldCallFacts, id: string): boolean => binarySearch(f.seen, id) >= 0

const binarySearch = (xs: ReadonlyArray<string>, x: string): number => {
  let lo = 0
  let hi = xs.length - 1
  while (lo <= hi) {
    const mid = (lo + hi) >> 1
    const v = xs[mid]!
    if (v === x) return mid
    if (v < x) lo = mid + 1
    else hi = mid - 1
  }
  return -1
}

const insertSorted = (xs: ReadonlyArray<string>, x: string): ReadonlyArray<string> => {
  let i = 0
  while (i < xs.length && xs[i]! < x) i++
  return [...xs.slice(0, i), x, ...xs.slice(i)]
}
