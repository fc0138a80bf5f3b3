import type { Envelope } from "../../schema/Envelope.js"
import type { HeldCallFacts } from "../../schema/Facts.js"
import { notFound, type Reply } from "../../schema/Reply.js"
import { sharedNamespace, type WitnessRegistry } from "../Counting.js"
import { beforeDispatch, canonicalCall } from "../Facts.js"
import { admittedWitnesses } from "../Reconciler.js"
import { SkewMs } from "./Decision.js"

/** What a witness's signed request about a held call binds, besides what it asks. */
export interface WitnessBound {
  readonly principal: string
  readonly class: string
  readonly held_id: string
  readonly generation: number
  readonly call_digest: string
  readonly contract_digest: string
  readonly issued_at: string
  readonly expires_at: string
}

const invalid = (reason: string): Reply => ({ status: 422, disposition: "invalid", reason })
const stale = (reason: string): Reply => ({ status: 409, disposition: "stale", reason })

/**
 * The binding every witness request other than an attestation must pass (an edit, an
 * extension): an open, undispatched call waiting for a witness; bound to this call, its current
 * generation, call and contract; unexpired and not issued in the future; from a registered
 * witness of a class (or by a name) the contract admits; independent of the proposer (another
 * principal, not the proposer's key). Null when it passes.
 */
export const judgeWitnessBinding = (f: HeldCallFacts, p: WitnessBound, envelope: Envelope, registry: WitnessRegistry, now: number, what: string): Reply | null => {
  const spec = f.spec
  if (spec === null) return notFound(f.held_id)
  if (f.lifecycle !== "open") return stale(`the call is ${f.lifecycle}`)
  if (!beforeDispatch(f)) return stale("the call was already dispatched")
  if (p.held_id !== f.held_id) return invalid(`bound to ${p.held_id}, not this call`)
  if (p.generation !== f.generation) return stale(`bound to generation ${p.generation}; the current generation is ${f.generation}`)
  if (p.call_digest !== canonicalCall(f)?.call_digest) return stale("bound to another call digest")
  if (f.verdict !== "REQUIRE_WITNESS" || f.witness_contract === null) return stale("the call is not waiting for a witness")
  if (p.contract_digest !== f.contract_digest) return invalid("contract mismatch: bound to another witness contract")
  if (Date.parse(p.expires_at) <= now) return invalid(`${what} expired at ${p.expires_at}`)
  if (Date.parse(p.issued_at) > now + SkewMs) return invalid(`issued_at ${p.issued_at} is more than ${SkewMs / 1000} s in the future (the allowed clock skew)`)
  if (p.principal === spec.principal || registry.keysOf(spec.principal).includes(envelope.key)) return invalid("witness is not independent of the proposer")
  const shared = sharedNamespace(registry, p.principal, spec.principal, spec.session_id)
  if (shared !== undefined) return invalid(`witness is not independent of the proposer: it acts in the proposer's session namespace '${shared}'`)
  if (!registry.classesOf(p.principal).includes(p.class)) return invalid(`principal '${p.principal}' is not registered with class '${p.class}'`)
  const admitted = admittedWitnesses(f.witness_contract)
  if (!admitted.classes.includes(p.class) && !admitted.principals.includes(p.principal)) return invalid(`wrong class: the contract does not accept class '${p.class}' or principal '${p.principal}'`)
  return null
}
