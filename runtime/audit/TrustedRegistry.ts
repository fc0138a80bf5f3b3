import { activePolicy, type ActivePolicy } from "../policy/ActivePolicy.js"
import { widens } from "../policy/Layers.js"
import { classifyChange, policyCall, PolicyApplyTool } from "../policy/PolicyChange.js"
import { canonicalize, heldIdOf } from "../schema/Canonical.js"
import type { Envelope } from "../schema/Envelope.js"
import { envelopeSignatureValid } from "../schema/EnvelopeSignature.js"
import type { HeldEvent } from "../schema/Events.js"
import type { PolicyApplied, WitnessedSignatures } from "../schema/PolicyApplied.js"
import type { Violation } from "./AuditReport.js"
import type { Finding, Unverified } from "./checks/Check.js"
import type { TrustRoot } from "./TrustRoot.js"

/** A `policy.applied` record as read: its stream sequence and the digest of its stored profiles. */
export type PolicyRecord = PolicyApplied & { readonly seq: number; readonly profiles_digest: string; readonly stored?: number }

/**
 * Where trust starts: a root given out of band, or (no root) the first record as found, which
 * is then unanchored: the report says so and prints its digest for the auditor to compare.
 */
export type TrustAnchor = { readonly _tag: "root"; readonly root: TrustRoot } | { readonly _tag: "first-record" }

/** The registry the checks may use, and what the derivation found. */
export interface TrustedRegistry {
  /** The records that verify from the anchor, in stream order. */
  readonly records: ReadonlyArray<PolicyRecord>
  /** The `registry` check's finding. */
  readonly finding: Finding
  /** One line for the report: what the registry was derived from (a trust root, or the first record as found). */
  readonly origin: string
  /** Whether it derives from a trust root given out of band (not from the first record as found). */
  readonly rooted: boolean
}

/** Who may authorize the next epoch: a principal and key that sign for a policy admin. */
type Authority = { readonly admin: (principal: string, key: string) => boolean; readonly label: string }

const rootAuthority = (root: TrustRoot): Authority => ({ admin: (p, k) => root.admins[p]?.includes(k) ?? false, label: "the trust root" })
const epochAuthority = (e: PolicyRecord, policy: ActivePolicy): Authority => ({
  admin: (p, k) => policy.admins.has(p) && (policy.principals.get(p)?.keys.includes(k) ?? false),
  label: `epoch ${e.epoch}`
})

const principalOf = (env: Envelope): string => String(env.payload["principal"] ?? "")
const sameProfiles = (a: ReadonlyArray<unknown>, b: ReadonlyArray<unknown>): boolean => canonicalize(a) === canonicalize(b)

/**
 * Derives the principal registry from a trust anchor, pure. Records are taken in stream order;
 * each must verify from the registry trusted before it:
 * - applied at once (`applied_by.envelope`): a valid `policy.apply` signed by a policy admin of
 *   the trusted registry (or the root), the record's profiles exactly that change applied, and
 *   a narrowing (a widening runs only as a witnessed call);
 * - applied by a witnessed `kernel_policy_apply` (`applied_by.held_id`): that call's signed
 *   proposal (an admin's `policy.apply`, deriving the held id) and, for a widening, another
 *   admin's signed approval of that generation, both found in the call's events;
 * - loaded at start-up (no `applied_by`): its digest is listed in the trust root, or it is the
 *   first record and there is no root (trust on first use), or it only narrows the trusted registry.
 * Epochs must increase with the stream sequence. A record that does not verify is a violation
 * and its keys are never trusted: later records are judged against the last trusted one.
 */
export const trustedRegistry = (
  records: ReadonlyArray<PolicyRecord>,
  anchor: TrustAnchor,
  callEvents: (heldId: string) => ReadonlyArray<HeldEvent> | undefined
): TrustedRegistry => {
  const violations: Array<Violation> = []
  const unverified: Array<Unverified> = []
  const trusted: Array<{ record: PolicyRecord; policy: ActivePolicy }> = []
  const ordered = [...records].sort((a, b) => a.seq - b.seq)
  const seen = new Set<number>()
  let lastEpoch = 0
  for (const r of ordered) {
    const label = `policy.applied:e${r.epoch}`
    const fail = (message: string) => void violations.push({ check: "registry", held_id: label, seqs: [r.seq], message })
    if (seen.has(r.epoch)) {
      fail(`epoch ${r.epoch} is recorded more than once; only the first record counts`)
      continue
    }
    seen.add(r.epoch)
    if (r.epoch <= lastEpoch) {
      fail(`policy record moved: epoch ${r.epoch} sits after epoch ${lastEpoch} in the stream; its keys are not trusted`)
      continue
    }
    lastEpoch = r.epoch
    const prev = trusted.at(-1)
    const authority = prev !== undefined ? epochAuthority(prev.record, prev.policy) : anchor._tag === "root" ? rootAuthority(anchor.root) : undefined
    const policy = activePolicy(r.epoch, r.profiles)
    const why = verifyRecord(r, prev?.policy, authority, anchor, r === ordered[0], callEvents)
    if (why === null) trusted.push({ record: r, policy })
    else fail(`${why}; its keys are not trusted`)
  }
  if (ordered.length === 0) unverified.push({ held_id: "_policy", seqs: [], message: "no policy record: no key can be shown registered" })
  const first = ordered[0]
  const anchorLine =
    anchor._tag === "root"
      ? `trust root: ${Object.keys(anchor.root.admins).length} admin(s), ${anchor.root.startup_profiles.length} start-up profile set(s), ${anchor.root.kernel_keys.length} kernel key(s)`
      : first === undefined
        ? "UNANCHORED: no trust root given and no policy record"
        : `UNANCHORED: no trust root given; trusting the first policy record as found (epoch ${first.epoch}, seq ${first.seq}, profiles sha256 ${first.profiles_digest}); pass --trust FILE`
  return {
    records: trusted.map((t) => t.record),
    finding: { checked: ordered.length, violations, unverified },
    origin: anchorLine,
    rooted: anchor._tag === "root"
  }
}

/** Why a record does not verify from what was trusted before it (null: it verifies). */
const verifyRecord = (
  r: PolicyRecord,
  prev: ActivePolicy | undefined,
  authority: Authority | undefined,
  anchor: TrustAnchor,
  first: boolean,
  callEvents: (heldId: string) => ReadonlyArray<HeldEvent> | undefined
): string | null => {
  const by = r.applied_by
  const listed = anchor._tag === "root" && anchor.root.startup_profiles.includes(r.profiles_digest)
  if (by === undefined) {
    if (listed) return null
    if (prev === undefined) {
      if (anchor._tag === "root") return `epoch ${r.epoch} was loaded from profile files whose digest ${r.profiles_digest} the trust root does not list`
      return first ? null : `epoch ${r.epoch} was loaded from profile files and no record before it is trusted to judge it`
    }
    const widenings = widens(prev.profiles, r.profiles)
    if (widenings.length === 0) return null
    return `epoch ${r.epoch} widens policy (${describe(widenings)}) with no signed origin (profile files at start-up not listed in the trust root)`
  }
  if (authority === undefined) return `epoch ${r.epoch} claims a signed origin but nothing is trusted to judge it (no trust root and no earlier record)`
  const base = prev?.profiles ?? []
  if ("envelope" in by) {
    const env = by.envelope
    const principal = principalOf(env)
    if (!envelopeSignatureValid(env) || env.payload["op"] !== "policy.apply") return `epoch ${r.epoch} was applied by an envelope that is not a valid signed policy.apply`
    if (!authority.admin(principal, env.key)) return `policy change by a non-admin: epoch ${r.epoch} was applied by ${principal}, whose key is not a policy admin's in ${authority.label}`
    const change = classifyChange(activePolicy(0, base), env.payload["profile"], "profile")
    if (change._tag === "Invalid" || !sameProfiles(change.profiles, r.profiles)) return `epoch ${r.epoch} does not hold exactly the profile ${principal} signed applied to ${authority.label}`
    if (change._tag === "Widening") return `widening applied without a second admin: epoch ${r.epoch} was applied at once on ${principal}'s request although it widens policy (${describe(change.widenings)})`
    return null
  }
  const signed = authorizingSignaturesOf(by, callEvents)
  if (signed === undefined) return `epoch ${r.epoch} names the witnessed change ${by.held_id}, which has no events in the stream or its archives and its record carries no signatures`
  const reasons: Array<string> = []
  for (const e of [...signed.proposals].reverse()) {
    const env = e.envelope
    const principal = principalOf(env)
    const change0 = signedChange(env.payload)
    if (!envelopeSignatureValid(env) || change0 === null) {
      reasons.push(`generation ${e.generation}: the proposal is not a valid signed policy.apply or kernel_policy_apply proposal`)
      continue
    }
    if (heldIdOf(principal, change0.call.session_id, change0.call.turn_id, change0.call.call_id, e.held_id_salt) !== by.held_id) {
      reasons.push(`generation ${e.generation}: the signed request derives another held id`)
      continue
    }
    if (!authority.admin(principal, env.key)) {
      reasons.push(`policy change by a non-admin: ${principal}'s key is not a policy admin's in ${authority.label}`)
      continue
    }
    const change = classifyChange(activePolicy(0, base), change0.profile, "profile")
    if (change._tag === "Invalid" || !sameProfiles(change.profiles, r.profiles)) {
      reasons.push(`generation ${e.generation}: the record does not hold exactly the profile ${principal} signed applied to ${authority.label}`)
      continue
    }
    if (change._tag === "Narrowing") return null
    const seconds = signed.approvals.filter((a) => {
      const p = a.payload
      return (
        p["op"] === "attest" &&
        p["decision"] === "approve" &&
        p["held_id"] === by.held_id &&
        p["generation"] === e.generation &&
        p["call_digest"] === e.call_digest &&
        principalOf(a) !== principal &&
        authority.admin(principalOf(a), a.key) &&
        envelopeSignatureValid(a)
      )
    })
    if (seconds.length > 0) return null
    reasons.push(`widening applied without a second admin: ${principal}'s change (${describe(change.widenings)}) carries no valid approval by another admin of ${authority.label}`)
  }
  return `epoch ${r.epoch} (witnessed change ${by.held_id}) is not authorized: ${reasons.length > 0 ? reasons.join("; ") : "the call has no signed policy.apply proposal"}`
}

/** A signed proposal of a witnessed change, as the record copies it or the call's history holds it. */
interface SignedProposal {
  readonly generation: number
  readonly call_digest: string
  readonly held_id_salt?: string | undefined
  readonly envelope: Envelope
}

/**
 * What authorized a witnessed change: the signatures its record carries, else the call's
 * `call.proposed` envelopes of `kernel_policy_apply` and its accepted attestations (undefined
 * when neither is there). Signatures verify on their own, wherever they were read.
 */
const authorizingSignaturesOf = (
  by: { readonly held_id: string; readonly signatures?: WitnessedSignatures | undefined },
  callEvents: (heldId: string) => ReadonlyArray<HeldEvent> | undefined
): { readonly proposals: ReadonlyArray<SignedProposal>; readonly approvals: ReadonlyArray<Envelope> } | undefined => {
  if (by.signatures !== undefined) {
    const s = by.signatures
    return { proposals: [{ generation: s.generation, call_digest: s.call_digest, held_id_salt: s.held_id_salt, envelope: s.proposal }], approvals: s.approvals }
  }
  const events = callEvents(by.held_id)
  if (events === undefined || events.length === 0) return undefined
  const proposals: Array<SignedProposal> = []
  const approvals: Array<Envelope> = []
  for (const e of events) {
    if (e.type === "call.proposed" && e.tool === PolicyApplyTool && e.envelope !== undefined) proposals.push({ generation: e.generation, call_digest: e.call_digest, held_id_salt: e.held_id_salt, envelope: e.envelope })
    else if (e.type === "attestation.accepted") approvals.push(e.envelope)
  }
  return { proposals, approvals }
}

/**
 * The profile and call ids a witnessed change was signed with: an admin's `policy.apply` (ids
 * derived from the profile), or an admin's own proposal of `kernel_policy_apply` (its ids as sent).
 */
const signedChange = (p: Readonly<Record<string, unknown>>): { readonly profile: unknown; readonly call: { readonly session_id: string; readonly turn_id: string; readonly call_id: string } } | null => {
  if (p["op"] === "policy.apply" && p["profile"] !== undefined) return { profile: p["profile"], call: policyCall(p) }
  const args = p["args"]
  if (p["op"] !== "propose" || p["tool"] !== PolicyApplyTool || typeof args !== "object" || args === null || !("profile" in args)) return null
  const { session_id, turn_id, call_id } = p
  if (typeof session_id !== "string" || typeof turn_id !== "string" || typeof call_id !== "string") return null
  return { profile: (args as { profile: unknown }).profile, call: { session_id, turn_id, call_id } }
}

const describe = (ws: ReadonlyArray<{ readonly field: string; readonly message: string }>): string =>
  ws
    .slice(0, 3)
    .map((w) => `${w.field}: ${w.message}`)
    .join("; ") + (ws.length > 3 ? `; and ${ws.length - 3} more` : "")
