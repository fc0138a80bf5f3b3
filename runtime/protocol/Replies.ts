import type { HeldCallFacts } from "../schema/Facts.js"
import { canonicalCall } from "../heldcall/Facts.js"

/** A reply body; `status` follows HTTP meanings as protocol.md sets them. */
export type Reply = { readonly status: number } & Record<string, unknown>

export const invalidRequest = (message: string, path: string): Reply => ({ status: 400, error: { code: "invalid_request", message, path } })
export const unauthenticated = (message: string): Reply => ({ status: 401, error: { code: "unauthenticated", message } })
export const forbidden = (message: string): Reply => ({ status: 403, error: { code: "forbidden", message } })
export const notFound = (heldId: string): Reply => ({ status: 404, error: { code: "not_found", message: `no held call ${heldId}` } })
export const conflict = (code: string, message: string): Reply => ({ status: 409, error: { code, message } })
export const unavailable = (message: string): Reply => ({ status: 503, error: { code: "unavailable", message } })

/** The propose reply that the facts of a call imply, or null while the call is still undecided. */
export const proposeReply = (f: HeldCallFacts): Reply | null => {
  const spec = f.spec
  if (spec === null) return null
  const call = canonicalCall(f)!
  switch (f.lifecycle) {
    case "completed": {
      const base = {
        status: 200,
        outcome: "completed",
        held_id: f.held_id,
        call_digest: call.call_digest,
        executed: { tool: call.tool, call_digest: call.call_digest },
        admission: f.result_admission,
        ok: f.effect?.ok ?? false,
        ...(f.effect?.ok === false ? { error: f.effect.error ?? "tool failed" } : {})
      }
      return f.result_admission === "quarantined" ? { ...base, result: null, quarantine: f.quarantine } : { ...base, result: f.result }
    }
    case "denied":
      return { status: 403, outcome: "denied", held_id: f.held_id, reasons: f.reasons }
    case "cancelled":
    case "expired":
      return { status: 409, outcome: f.lifecycle, held_id: f.held_id, error: { code: `call_${f.lifecycle}`, message: `held call ${f.held_id} was ${f.lifecycle}` } }
    case "open":
      if (f.verdict === "REQUIRE_WITNESS" && f.held && f.witness_request !== null && f.execution === "none") {
        return {
          status: 202,
          outcome: "held",
          held_id: f.held_id,
          call_digest: call.call_digest,
          generation: f.generation,
          witness_request: f.witness_request,
          expires_at: spec.expires_at
        }
      }
      return null
  }
}

/** The `held.get` view of a call. */
export const heldView = (f: HeldCallFacts) => {
  const spec = f.spec
  return {
    held_id: f.held_id,
    session_id: spec?.session_id,
    turn_id: spec?.turn_id,
    call_id: spec?.call_id,
    principal: spec?.principal,
    tool: canonicalCall(f)?.tool,
    args: canonicalCall(f)?.args,
    call_digest: canonicalCall(f)?.call_digest,
    proposed: spec === null ? undefined : { tool: spec.tool, args: spec.args, call_digest: spec.call_digest },
    continuation_ref: spec?.continuation_ref,
    generation: f.generation,
    verdict: f.verdict,
    reasons: f.reasons,
    witness_contract: f.witness_contract,
    contract_digest: f.contract_digest,
    witness_request: f.witness_request,
    active_rule: f.active_rule,
    created_at: spec?.created_at,
    expires_at: spec?.expires_at,
    lifecycle: f.lifecycle,
    readiness: f.readiness,
    policy_epoch: f.policy_epoch,
    policy_epoch_checked: f.policy_epoch_checked,
    execution: f.execution,
    needs_witness: f.needs_witness,
    dispatch_attempts: f.dispatch_attempts,
    result_admission: f.result_admission,
    continuation_delivery: f.continuation_delivery,
    delivery_id: f.delivery_id,
    outcome: f.outcome,
    ...(spec?.parent_held_id !== undefined ? { parent_held_id: spec.parent_held_id, dependency_depth: spec.ancestors?.length ?? 1 } : {}),
    ...(f.dependencies !== undefined ? { dependencies: f.dependencies } : {}),
    evidence: f.evidence
      .filter((e) => e.generation === f.generation)
      .map((e) => ({ witness: e.witness, class: e.class, decision: e.decision, status: e.status, ...(e.reason ? { reason: e.reason } : {}), issued_at: e.issued_at, expires_at: e.expires_at })),
    ...(f.result_admission === "admitted" ? { result: f.result } : {}),
    ...(f.quarantine ? { quarantine: f.quarantine } : {}),
    last_seq: f.last_seq
  }
}
