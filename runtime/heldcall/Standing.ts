import type { Envelope } from "../schema/Envelope.js"
import type { EventOf } from "../schema/Events.js"
import type { HeldCallFacts } from "../schema/Facts.js"
import type { JsonObject, JsonValue } from "../schema/Json.js"
import { canonicalize } from "../schema/Canonical.js"
import { routeAdmits } from "../schema/WitnessContract.js"
import { argNameProblem, MaxStandingMs, type ArgBound, type StandingGrantPayload, type StandingRecord, type StandingScope, type StandingUse } from "../schema/StandingGrant.js"
import { finalNoOf, sharedNamespace, type WitnessRegistry } from "./Counting.js"
import { beforeDispatch, canonicalCall } from "./Facts.js"
import { admittedWitnesses } from "./Reconciler.js"
import { EventIds } from "./EventIds.js"
import { SkewMs } from "./decide/Decision.js"

/**
 * Standing approvals, pure: whether a grant may be recorded, whether it covers a held call, and
 * the evidence it adds to one. The kernel and the auditor apply the same rules.
 */

/** The kernel's reserved tools (`kernel_*`, e.g. a witnessed policy change): never approved in advance. */
const isReserved = (tool: string): boolean => tool.startsWith("kernel_")

const boundHolds = (b: ArgBound, v: JsonValue | undefined): boolean => {
  if (b.any === true) return true
  if (b.eq !== undefined && (v === undefined || canonicalize(v) !== canonicalize(b.eq))) return false
  if (b.in !== undefined && (v === undefined || !b.in.some((x) => canonicalize(x) === canonicalize(v)))) return false
  if (b.max !== undefined && (typeof v !== "number" || v > b.max)) return false
  if (b.min !== undefined && (typeof v !== "number" || v < b.min)) return false
  return true
}

/**
 * Why a call with `tool` and `args` by `proposer` is outside a scope, or null when it is inside:
 * every bound holds, and every argument of the call is one the scope bounds (or leaves free with
 * `any: true`). An argument the grant does not name was never shown bounded to its witness.
 */
export const outsideScope = (scope: StandingScope, proposer: string, tool: string, args: JsonObject): string | null => {
  if (!scope.principals.includes(proposer)) return `the grant does not cover calls by ${proposer}`
  if (scope.tool !== tool) return `the grant covers ${scope.tool}, not ${tool}`
  const bounds = scope.args ?? {}
  for (const [field, bound] of Object.entries(bounds)) {
    if (!boundHolds(bound, args[field])) return `argument ${field} is outside the grant's bound ${JSON.stringify(bound)}`
  }
  for (const field of Object.keys(args)) {
    if (!Object.hasOwn(bounds, field)) return `argument ${field} is not bounded by the grant (a grant bounds every argument, or leaves one free with any: true)`
  }
  return null
}

/**
 * Why a signed grant may not be recorded (null: it may): bounded (expires within
 * `MaxStandingMs`, not already expired, not issued in the future), from a witness registered with
 * its class, not for a reserved `kernel_*` tool, covering only other principals (a grant for oneself, or for a principal in one's own
 * session namespace, approves nothing), and every bound well formed: at least one of eq, in, max,
 * min, or `any: true` alone (an argument left free is left free explicitly).
 */
export const judgeStandingGrant = (p: StandingGrantPayload, registry: WitnessRegistry, now: number): string | null => {
  const expires = Date.parse(p.expires_at)
  if (expires <= now) return `expires_at ${p.expires_at} has passed`
  if (expires > now + MaxStandingMs) return `expires_at ${p.expires_at} is more than ${MaxStandingMs / 3_600_000} h from now: a standing approval is bounded`
  if (Date.parse(p.issued_at) > now + SkewMs) return `issued_at ${p.issued_at} is more than ${SkewMs / 1000} s in the future (the allowed clock skew)`
  if (p.not_before !== undefined && Date.parse(p.not_before) >= expires) return "not_before is not before expires_at"
  if (!registry.classesOf(p.principal).includes(p.class)) return `principal '${p.principal}' is not registered with class '${p.class}'`
  if (isReserved(p.scope.tool)) return `scope.tool ${p.scope.tool} is the kernel's own: each policy change is approved on its own, never in advance`
  for (const agent of p.scope.principals) {
    if (agent === p.principal) return "a witness cannot approve its own calls: scope.principals names the granting principal"
    const ns = registry.namespaceOf?.(p.principal)
    if (ns !== undefined && ns === registry.namespaceOf?.(agent)) return `scope.principals names ${agent}, which acts in the granting witness's session namespace '${ns}'`
  }
  for (const [field, b] of Object.entries(p.scope.args ?? {})) {
    const badName = argNameProblem(field)
    if (badName !== null) return `scope.args names an argument ${JSON.stringify(field)} that ${badName}`
    const given = [b.eq !== undefined, b.in !== undefined, b.max !== undefined, b.min !== undefined].filter(Boolean).length
    if (b.any === true && given > 0) return `scope.args.${field}: any: true leaves the argument free; give it alone, or bound the argument without it`
    if (b.any !== true && given === 0) return `scope.args.${field} bounds nothing: give eq, in, max or min (or any: true to leave it free, explicitly)`
    if (b.max !== undefined && b.min !== undefined && b.min > b.max) return `scope.args.${field}: min is above max`
  }
  return null
}

/** The use this grant gave `f`'s current generation already, if any. */
export const useFor = (uses: ReadonlyArray<StandingUse>, heldId: string, generation: number): number | undefined => {
  const i = uses.findIndex((u) => u.held_id === heldId && u.generation === generation)
  return i < 0 ? undefined : i + 1
}

/**
 * Why a recorded grant does not approve `f`'s current generation now (null: it does): the call is
 * open, undispatched and waiting for a witness; the grant is in its window, not revoked, and has a
 * use left (or already gave this generation one); the call is inside its scope (the canonical
 * call, after any transform: what witnesses bind to); its witness is still registered with the
 * class and key that signed it, independent of the proposer, admitted by the contract and on its
 * route, and has not said a final no to this generation.
 */
export const standingRefusal = (f: HeldCallFacts, record: StandingRecord, p: StandingGrantPayload, registry: WitnessRegistry, now: number): string | null => {
  const spec = f.spec
  const call = canonicalCall(f)
  if (spec === null || call === null) return "no such call"
  if (f.lifecycle !== "open" || !beforeDispatch(f)) return `the call is ${f.lifecycle === "open" ? "dispatched" : f.lifecycle}`
  if (f.verdict !== "REQUIRE_WITNESS" || f.witness_contract === null) return "the call is not waiting for a witness"
  if (isReserved(call.tool) || isReserved(spec.tool)) return "the kernel's own tools are approved call by call"
  if (record.revocation !== undefined) return "the grant is revoked"
  if (Date.parse(p.expires_at) <= now) return "the grant has expired"
  if (p.not_before !== undefined && Date.parse(p.not_before) > now) return "the grant is not in force yet"
  if (useFor(record.uses, f.held_id, f.generation) === undefined && record.uses.length >= p.max_uses) return `the grant's ${p.max_uses} use(s) are spent`
  const outside = outsideScope(p.scope, spec.principal, call.tool, call.args)
  if (outside !== null) return outside
  if (p.principal === spec.principal || registry.keysOf(spec.principal).includes(record.grant.key)) return "the grant's witness is not independent of the proposer"
  if (sharedNamespace(registry, p.principal, spec.principal, spec.session_id) !== undefined) return "the grant's witness acts in the proposer's session namespace"
  const classes = registry.classesOf(p.principal)
  if (!classes.includes(p.class) || !registry.keysOf(p.principal).includes(record.grant.key)) return `the grant's witness ${p.principal} no longer holds class '${p.class}' with the key that signed it`
  const admitted = admittedWitnesses(f.witness_contract)
  if (!admitted.classes.includes(p.class) && !admitted.principals.includes(p.principal)) return `the contract does not accept class '${p.class}' or principal '${p.principal}'`
  const route = f.witness_contract.route
  if (route !== undefined && !routeAdmits(route, p.principal, classes)) return `${p.principal} is not on the contract's witness route`
  if (finalNoOf(f, p.principal) !== undefined) return `${p.principal} already said a final no to generation ${f.generation}`
  return null
}

/** The event that records a grant's use on a call: that witness's approval of the current generation, until the grant expires. */
export const standingApplied = (f: HeldCallFacts, record: StandingRecord, p: StandingGrantPayload, use: number, at: string): EventOf<"standing.applied"> => ({
  type: "standing.applied",
  event_id: EventIds.standingApplied(f.held_id, f.generation, record.grant_id, f.contract_digest ?? ""),
  held_id: f.held_id,
  generation: f.generation,
  at,
  witness: p.principal,
  class: p.class,
  grant_id: record.grant_id,
  grant_digest: record.grant_digest,
  use,
  call_digest: canonicalCall(f)!.call_digest,
  contract_digest: f.contract_digest!,
  issued_at: p.issued_at,
  expires_at: p.expires_at,
  envelope: record.grant as Envelope
})
