import { Either, Schema } from "effect"
import { canonicalize, jcsDigest } from "../../schema/Canonical.js"
import { envelopeSignatureValid } from "../../schema/EnvelopeSignature.js"
import type { EventOf } from "../../schema/Events.js"
import type { HeldCallFacts } from "../../schema/Facts.js"
import { decodeStandingRecord, StandingGrantPayload, StandingRevokePayload, type StandingRecord } from "../../schema/StandingGrant.js"
import { judgeStandingGrant, standingRefusal } from "../../heldcall/Standing.js"
import { registryOf } from "../../policy/ActivePolicy.js"
import type { CheckResult, Violation } from "../AuditReport.js"
import type { PolicyHistory } from "../PolicyHistory.js"
import type { Traced } from "../HeldHistory.js"

/** One grant's records as read from its subject (`_standing.<grant_id>`), in stream order. */
export interface GrantMessage {
  readonly seq: number
  readonly data: Uint8Array
}

/** A `standing.applied` step of a call, with the facts just before it. */
export interface AppliedUse {
  readonly heldId: string
  readonly seq: number
  readonly event: EventOf<"standing.applied">
  readonly before: HeldCallFacts
}

/** The standing uses a re-folded call records (its steps must be kept). */
export const appliedUsesOf = (call: Traced): ReadonlyArray<AppliedUse> =>
  call.steps.flatMap((s) => (s.event.type === "standing.applied" && s.fresh ? [{ heldId: call.heldId, seq: s.seq, event: s.event, before: s.before }] : []))

const decodeGrant = Schema.decodeUnknownEither(StandingGrantPayload)
const decodeRevoke = Schema.decodeUnknownEither(StandingRevokePayload)
const text = new TextDecoder()

interface GrantHistory {
  readonly payload: StandingGrantPayload
  readonly grantCanonical: string
  readonly digest: string
  /** The uses as the last record lists them, each with the sequence of the record that added it. */
  readonly uses: ReadonlyArray<StandingRecord["uses"][number] & { readonly seq: number }>
}

/**
 * `standing`: every standing approval's history and every use of one, across calls. A grant's
 * subject is a chain of whole records: the first one records the signed grant with no use, and
 * the grant passes the kernel's own rule (`judgeStandingGrant`) under the registry then in force;
 * each later record keeps the same signed grant and adds exactly one use, or records a signed
 * revocation by the grant's witness or an admin, after which nothing follows; no grant has more
 * uses than `max_uses`, none outside its window, none twice for one call and generation. Every
 * `standing.applied` on a call names a grant that holds, its use there names that call, and the
 * kernel's rule (`standingRefusal`) approves the call at that use, from the facts just before it,
 * under the registry in force at its time. A use with no call recorded (a process that stopped
 * between the two) is named as unverified when every call was read: a use spent, never one given twice.
 */
export const standingCheck = (grants: ReadonlyMap<string, ReadonlyArray<GrantMessage>>, applied: ReadonlyArray<AppliedUse>, policy: PolicyHistory, everyCall: boolean): CheckResult => {
  const violations: Array<Violation> = []
  const unverified: Array<{ held_id: string; seqs: Array<number>; message: string }> = []
  const fail = (heldId: string, seqs: ReadonlyArray<number>, message: string) => void violations.push({ check: "standing", held_id: heldId, seqs: [...seqs], message })
  const histories = new Map<string, GrantHistory>()
  let checked = 0

  for (const [grantId, messages] of grants) {
    checked++
    const where = `_standing.${grantId}`
    const records: Array<{ seq: number; record: StandingRecord }> = []
    for (const m of messages) {
      const r = decodeStandingRecord(text.decode(m.data))
      if (Either.isLeft(r)) fail(where, [m.seq], `a record does not decode: ${r.left.message.slice(0, 200)}`)
      else if (r.right.grant_id !== grantId) fail(where, [m.seq], `a record of grant ${r.right.grant_id} is stored on ${where}`)
      else records.push({ seq: m.seq, record: r.right })
    }
    const first = records[0]
    if (first === undefined) continue
    const p = decodeGrant(first.record.grant.payload)
    if (Either.isLeft(p) || p.right.grant_id !== grantId) {
      fail(where, [first.seq], "the first record's signed grant is not a standing.grant payload for this grant_id")
      continue
    }
    const payload = p.right
    const grantCanonical = canonicalize(first.record.grant)
    const digest = jcsDigest(payload)
    if (first.record.type !== "standing.granted" || first.record.uses.length > 0) fail(where, [first.seq], "the first record is not the grant with no use")
    if (first.record.grant_digest !== digest) fail(where, [first.seq], "grant_digest is not the digest of the signed grant")
    if (!envelopeSignatureValid(first.record.grant)) fail(where, [first.seq], "the grant's signature does not verify over the JCS of its payload")
    const inForce = policy.at(first.seq, first.record.at)
    if (inForce === undefined) unverified.push({ held_id: where, seqs: [first.seq], message: `no policy in force at ${first.record.at}: cannot judge the grant` })
    else {
      const registry = registryOf(inForce.policy)
      if (!registry.keysOf(payload.principal).includes(first.record.grant.key)) fail(where, [first.seq], `the grant's key was not registered to ${payload.principal} when it was recorded`)
      const refused = judgeStandingGrant(payload, registry, Date.parse(first.record.at))
      if (refused !== null) fail(where, [first.seq], `the kernel's rule refuses this grant: ${refused}`)
    }
    const uses: Array<GrantHistory["uses"][number]> = []
    let revokedAt: number | undefined
    for (let i = 1; i < records.length; i++) {
      const { seq, record } = records[i]!
      const prev = records[i - 1]!.record
      if (revokedAt !== undefined) fail(where, [revokedAt, seq], "a record follows the revocation")
      if (canonicalize(record.grant) !== grantCanonical || record.grant_digest !== digest) fail(where, [seq], "a record carries another grant than the first")
      const kept = prev.uses.every((u, k) => canonicalize(record.uses[k] ?? null) === canonicalize(u))
      if (record.type === "standing.used") {
        if (!kept || record.uses.length !== prev.uses.length + 1) fail(where, [seq], "a use record does not add exactly one use to the uses before it")
        const u = record.uses[record.uses.length - 1]
        if (u !== undefined) uses.push({ ...u, seq })
      } else if (record.type === "standing.revoked") {
        revokedAt = seq
        if (!kept || record.uses.length !== prev.uses.length) fail(where, [seq], "the revocation changes the uses")
        const r = record.revocation === undefined ? undefined : decodeRevoke(record.revocation.payload)
        if (record.revocation === undefined || r === undefined || Either.isLeft(r) || r.right.grant_id !== grantId) fail(where, [seq], "the revocation is not a signed standing.revoke of this grant")
        else if (!envelopeSignatureValid(record.revocation)) fail(where, [seq], "the revocation's signature does not verify")
        else {
          const by = r.right.principal
          const at = policy.at(seq, record.at)
          const registered = at?.policy.principals.get(by)?.keys.includes(record.revocation.key) ?? false
          if (!registered) fail(where, [seq], `the revocation's key was not registered to ${by}`)
          else if (by !== payload.principal && !at!.policy.admins.has(by)) fail(where, [seq], `${by} may not revoke ${payload.principal}'s grant`)
        }
      } else fail(where, [seq], "a later record claims to be the grant")
    }
    if (uses.length > payload.max_uses) fail(where, uses.slice(payload.max_uses).map((u) => u.seq), `${uses.length} uses of a grant of ${payload.max_uses}`)
    const seen = new Set<string>()
    for (const u of uses) {
      const key = `${u.held_id}\u0000${u.generation}`
      if (seen.has(key)) fail(where, [u.seq], `two uses for ${u.held_id} generation ${u.generation}`)
      seen.add(key)
      const t = Date.parse(u.at)
      if (t >= Date.parse(payload.expires_at) || (payload.not_before !== undefined && t < Date.parse(payload.not_before))) fail(where, [u.seq], `a use at ${u.at} outside the grant's window`)
    }
    histories.set(grantId, { payload, grantCanonical, digest, uses })
  }

  const recorded = new Set<string>()
  for (const a of applied) {
    checked++
    const e = a.event
    const h = histories.get(e.grant_id)
    if (h === undefined) {
      fail(a.heldId, [a.seq], `standing.applied names grant ${e.grant_id}, whose records ${grants.has(e.grant_id) ? "do not hold" : "are not in the stream"}`)
      continue
    }
    if (canonicalize(e.envelope) !== h.grantCanonical || e.grant_digest !== h.digest) fail(a.heldId, [a.seq], `standing.applied carries another grant than ${e.grant_id}'s records`)
    if (e.witness !== h.payload.principal || e.class !== h.payload.class || e.issued_at !== h.payload.issued_at || e.expires_at !== h.payload.expires_at) fail(a.heldId, [a.seq], "standing.applied does not record what the grant signs (witness, class, times)")
    const use = h.uses[e.use - 1]
    if (use === undefined || use.held_id !== a.heldId || use.generation !== e.generation || use.call_digest !== e.call_digest) {
      fail(a.heldId, [a.seq], `use ${e.use} of grant ${e.grant_id} is not this call's (the grant's records name ${use === undefined ? "no such use" : `${use.held_id} generation ${use.generation}`})`)
      continue
    }
    recorded.add(`${e.grant_id}\u0000${e.use}`)
    const inForce = policy.at(a.seq, e.at)
    if (inForce === undefined) {
      unverified.push({ held_id: a.heldId, seqs: [a.seq], message: `no policy in force at ${e.at}: cannot judge the standing approval` })
      continue
    }
    // The grant's records at this use: the uses up to and including it, unrevoked (a use follows no revocation).
    const record: StandingRecord = { type: "standing.used", grant_id: e.grant_id, grant_digest: h.digest, grant: e.envelope, uses: h.uses.slice(0, e.use), at: use.at }
    const refused = standingRefusal(a.before, record, h.payload, registryOf(inForce.policy), Date.parse(e.at))
    if (refused !== null) fail(a.heldId, [a.seq], `the kernel's rule refuses standing approval ${e.grant_id} here: ${refused}`)
  }
  for (const [grantId, h] of histories) {
    h.uses.forEach((u, i) => {
      if (everyCall && !recorded.has(`${grantId}\u0000${i + 1}`)) {
        unverified.push({ held_id: `_standing.${grantId}`, seqs: [u.seq], message: `use ${i + 1} (${u.held_id}) is recorded on no call read here: spent, not given` })
      }
    })
  }
  return {
    name: "standing",
    status: violations.length > 0 ? "failed" : "passed",
    checked,
    violations,
    unverified,
    note: `${grants.size} standing approval(s), ${applied.length} use(s) on calls`
  }
}
