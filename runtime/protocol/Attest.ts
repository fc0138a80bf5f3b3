import { Effect } from "effect"
import { Driver } from "../loops/Driver.js"
import { KernelConfig } from "../KernelConfig.js"
import { wake } from "../ledger/Wakes.js"
import { eventOf } from "../loops/Actions.js"
import { beforeDispatch, canonicalCall } from "../heldcall/Facts.js"
import { admittedWitnesses } from "../heldcall/Reconciler.js"
import { currentPresentationDigest, finalNoOf } from "../heldcall/Counting.js"
import { classesOf, type ActivePolicy } from "../policy/ActivePolicy.js"
import { jcsDigest } from "../schema/Canonical.js"
import { routeAdmits } from "../schema/WitnessContract.js"
import type { AttestationAccepted, AttestationRejected } from "../schema/Events.js"
import type { HeldCallFacts } from "../schema/Facts.js"
import { AttestPayload } from "../schema/Requests.js"
import type { Envelope } from "../schema/Envelope.js"
import type { Reply } from "./Replies.js"
import type { Decided } from "./internal/appendDecided.js"
import { driveDecided } from "./internal/driveDecided.js"
import { signedRequest } from "./Request.js"

/** Tolerated clock skew for `issued_at` in the future. */
export const SkewMs = 60_000

type Verdict = { readonly disposition: "accepted" } | { readonly disposition: "stale" | "invalid"; readonly reason: string }

/**
 * Invariants 3 and 4: an attestation counts only if it is bound to this call's held id,
 * generation, call digest, contract digest and (when it names one) the presentation shown now,
 * is unexpired, not issued in the future beyond the skew, unreplayed, from a registered witness
 * of a class the contract admits, independent of the proposer, and no approval after that
 * witness's own reject or revoke of the generation.
 */
export const judgeAttestation = (f: HeldCallFacts, p: AttestPayload, env: Envelope, policy: ActivePolicy, now: number): Verdict => {
  const spec = f.spec!
  if (f.lifecycle !== "open") return { disposition: "stale", reason: `the call is ${f.lifecycle}` }
  if (!beforeDispatch(f)) return { disposition: "stale", reason: "the call was already dispatched" }
  if (p.generation !== f.generation) return { disposition: "stale", reason: `bound to generation ${p.generation}; the current generation is ${f.generation}` }
  if (p.call_digest !== canonicalCall(f)?.call_digest) return { disposition: "stale", reason: "bound to another call digest" }
  if (f.verdict !== "REQUIRE_WITNESS" || f.witness_contract === null) return { disposition: "stale", reason: "the call is not waiting for a witness" }
  if (p.contract_digest !== f.contract_digest) return { disposition: "invalid", reason: "contract mismatch: bound to another witness contract" }
  if (p.presentation_digest !== undefined && p.presentation_digest !== currentPresentationDigest(f)) {
    return { disposition: "stale", reason: "bound to another presentation: the call is shown differently now; read it again" }
  }
  if (Date.parse(p.expires_at) <= now) return { disposition: "invalid", reason: `attestation expired at ${p.expires_at}` }
  if (Date.parse(p.issued_at) > now + SkewMs) return { disposition: "invalid", reason: `issued_at ${p.issued_at} is more than ${SkewMs / 1000} s in the future (the allowed clock skew)` }
  if (p.principal === spec.principal) return { disposition: "invalid", reason: "witness is not independent of the proposer: same principal" }
  if ((policy.principals.get(spec.principal)?.keys ?? []).includes(env.key)) return { disposition: "invalid", reason: "witness is not independent of the proposer: the proposer's key" }
  if (!classesOf(policy, p.principal).includes(p.class)) return { disposition: "invalid", reason: `principal '${p.principal}' is not registered with class '${p.class}'` }
  const admitted = admittedWitnesses(f.witness_contract)
  if (!admitted.classes.includes(p.class) && !admitted.principals.includes(p.principal)) {
    return { disposition: "invalid", reason: `wrong class: the contract does not accept class '${p.class}' or principal '${p.principal}'` }
  }
  const route = f.witness_contract.route
  if (p.decision === "approve" && route !== undefined && !routeAdmits(route, p.principal, classesOf(policy, p.principal))) {
    return { disposition: "invalid", reason: `principal '${p.principal}' is not on the contract's witness route` }
  }
  if (f.evidence.some((e) => e.witness === p.principal && e.nonce === p.nonce)) return { disposition: "invalid", reason: "nonce already used by this witness on this call (replay)" }
  const final = p.decision === "approve" || p.decision === "evidence" ? finalNoOf(f, p.principal) : undefined
  if (final !== undefined) {
    const did = final === "reject" ? "rejected" : final === "revoke" ? "revoked its approval of" : "failed a nested call it attached to"
    return { disposition: "invalid", reason: `this witness already ${did} generation ${f.generation}; that is final for the generation` }
  }
  return { disposition: "accepted" }
}

const replyFor = (v: Verdict, duplicate = false): Reply =>
  duplicate
    ? { status: 200, disposition: "duplicate" }
    : v.disposition === "accepted"
      ? { status: 202, disposition: "accepted" }
      : { status: v.disposition === "stale" ? 409 : 422, disposition: v.disposition, reason: v.reason }

/** `wk.v1.held.attest`: records the attestation (accepted or rejected, both as events) and never waits for execution. */
export const attest = (data: Uint8Array) =>
  Effect.gen(function* () {
    const { payload: p, envelope, policy } = yield* signedRequest(data, "attest", AttestPayload)
    const digest = jcsDigest(p)
    const acceptedId = `attestation.accepted:${p.held_id}:${digest}`
    const rejectedId = `attestation.rejected:${p.held_id}:${digest}`
    // An accepted attestation joins the drive it enables: one commit with the readiness and the
    // execution claim it releases (and that claim's recovery wake), answered once it is durable.
    const { reply, appended } = yield* driveDecided(p.held_id, (f): Decided => {
      if (f.seen.includes(acceptedId)) return { reply: replyFor({ disposition: "accepted" }, true) }
      const v = judgeAttestation(f, p, envelope, policy, Date.now())
      if (f.seen.includes(rejectedId)) return { reply: replyFor(v) }
      const base = { held_id: p.held_id, generation: f.generation }
      const event =
        v.disposition === "accepted"
          ? eventOf<typeof AttestationAccepted.Type>({
              ...base,
              generation: p.generation,
              type: "attestation.accepted",
              event_id: acceptedId,
              witness: p.principal,
              class: p.class,
              decision: p.decision,
              attestation_digest: digest,
              call_digest: p.call_digest,
              contract_digest: p.contract_digest,
              issued_at: p.issued_at,
              expires_at: p.expires_at,
              nonce: p.nonce,
              ...(p.evidence_digest !== undefined ? { evidence_digest: p.evidence_digest } : {}),
              ...(p.presentation_digest !== undefined ? { presentation_digest: p.presentation_digest } : {}),
              ...(p.reason !== undefined ? { reason: p.reason } : {}),
              envelope
            })
          : eventOf<typeof AttestationRejected.Type>({
              ...base,
              type: "attestation.rejected",
              event_id: rejectedId,
              witness: p.principal,
              class: p.class,
              disposition: v.disposition,
              reason: v.reason,
              attestation_digest: digest,
              envelope
            })
      return { reply: replyFor(v), event }
    })
    // A duplicate is a witness retrying bytes already recorded: the process that recorded them
    // may have died before it drove the call or wrote its wake, so a duplicate drives it again.
    const duplicate = reply.status === 200 && reply.disposition === "duplicate"
    if (duplicate) yield* Effect.forkDaemon((yield* Driver).drive(p.held_id, "fresh").pipe(Effect.ignore))
    // The wake lets another process finish the call if this one stops. A commit that dispatched
    // wrote its own wake in the same flush; otherwise it is written here.
    if ((reply.status === 202 && (appended === null || beforeDispatch(appended.facts))) || duplicate) {
      const cfg = yield* KernelConfig
      yield* wake(p.held_id, { owner: cfg.owner, until: Date.now() + cfg.leaseMs })
    }
    return reply
  })
