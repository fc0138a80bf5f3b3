import { Effect, Either, Schema } from "effect"
import type { LedgerReader } from "../../ledger/LedgerReader.js"
import type { HeldEvent } from "../../schema/Events.js"
import { KeyRotationSubject } from "../../schema/KeyRotation.js"
import { PolicyApplied } from "../../schema/PolicyApplied.js"
import type { AuditError } from "../AuditError.js"
import type { Violation } from "../AuditReport.js"
import { parseCommit } from "../internal/fastDecode.js"
import { kernelKeysOf, type KernelKeys } from "../KernelKeys.js"
import { policyHistory, type PolicyHistory } from "../PolicyHistory.js"
import { recordPlacement } from "../RecordPlacement.js"
import { readSubject, type RawMessage } from "../StreamReader.js"
import { trustedRegistry, type PolicyRecord, type TrustedRegistry } from "../TrustedRegistry.js"
import { startupDigest } from "../TrustRoot.js"
import type { Collected } from "./Collect.js"
import type { ReplayPlan } from "./Plan.js"

const decodePolicy = Schema.decodeUnknownEither(Schema.parseJson(PolicyApplied))
const text = new TextDecoder()

/** What the auditor may trust, derived from the trust root (or the first record) and the records. */
export interface Trusted {
  readonly registry: TrustedRegistry
  /** The registry by stream position, from the trusted records only. */
  readonly policy: PolicyHistory
  /** Where each policy record sits against the events around it (fed per call by the tally). */
  readonly placement: ReturnType<typeof recordPlacement>
  /** The root's kernel keys followed through rotations (undefined: the root lists none). */
  readonly kernelKeys: KernelKeys | undefined
  /** Policy records that do not decode (`stream`). */
  readonly streamViolations: ReadonlyArray<Violation>
  /** Archive records whose purge no trusted kernel key signed (`archive`). */
  readonly archiveViolations: ReadonlyArray<Violation>
  /** Archive records with no signature, counted when no kernel key is required. */
  readonly unsignedArchives: number
}

/** Policy records as stored, each with its digest of profiles; those that do not decode are violations. */
export const policyRecordsOf = (messages: ReadonlyArray<RawMessage>): { readonly records: Array<PolicyRecord>; readonly violations: Array<Violation> } => {
  const records: Array<PolicyRecord> = []
  const violations: Array<Violation> = []
  for (const m of messages) {
    const body = text.decode(m.data)
    const r = decodePolicy(body)
    if (Either.isRight(r)) records.push({ ...r.right, seq: m.seq, stored: m.time, profiles_digest: startupDigest((JSON.parse(body) as { profiles: unknown }).profiles) })
    else violations.push({ check: "stream", held_id: "_policy", seqs: [m.seq], message: `a policy record does not decode: ${r.left.message.slice(0, 200)}` })
  }
  return { records, violations }
}

/**
 * Stage 3: the trust. Reads the policy records (and the histories of the witnessed calls that
 * applied some), derives the registry from the trust root, follows the kernel keys through the
 * rotation records, and judges each archive record's signature against them.
 */
export const verifyTrust = (plan: ReplayPlan, collected: Collected): Effect.Effect<Trusted, AuditError, LedgerReader> =>
  Effect.gen(function* () {
    const { stream, layout } = plan
    const trust = plan.options.trust
    const { records, violations: streamViolations } = policyRecordsOf(yield* readSubject(stream, `${layout.prefix}_policy`))
    // A witnessed policy change is authorized by its call's signed proposal and approvals.
    const witnessed = new Map<string, ReadonlyArray<HeldEvent>>()
    for (const r of records) {
      const by = r.applied_by
      if (by === undefined || !("held_id" in by) || witnessed.has(by.held_id)) continue
      const hot = yield* readSubject(stream, `${layout.prefix}${by.held_id}`)
      const msgs = [...hot, ...(collected.archived.byHeld.get(by.held_id) ?? []).filter((m) => !hot.some((h) => h.seq === m.seq))]
      witnessed.set(by.held_id, msgs.flatMap((m) => { try { return [...parseCommit(m.data).events] } catch { return [] } }))
    }
    const registry = trustedRegistry(records, trust !== undefined ? { _tag: "root", root: trust } : { _tag: "first-record" }, (id) => witnessed.get(id))
    // A selection reads only its calls: rotation records are read on their own subject then.
    const rotations = plan.wholeStream ? collected.rotations : yield* readSubject(stream, `${layout.prefix}${KeyRotationSubject}`)
    const kernelKeys = trust !== undefined && trust.kernel_keys.length > 0 ? kernelKeysOf(trust.kernel_keys, rotations) : undefined
    const signers = archiveSigners(collected.archived.signers, kernelKeys)
    return {
      registry,
      policy: policyHistory(registry.records, plan.registrySkewMs),
      placement: recordPlacement(records, plan.registrySkewMs),
      kernelKeys,
      streamViolations,
      archiveViolations: signers.violations,
      unsignedArchives: signers.unsigned
    }
  })

/**
 * A purge is authorized by a record the kernel signed: with the root's kernel keys, any other
 * record's purge is a violation (an attacker who may purge cannot also sign); without them,
 * unsigned records are counted.
 */
export const archiveSigners = (
  signers: ReadonlyArray<{ readonly seq: number; readonly key: string | undefined }>,
  kernelKeys: KernelKeys | undefined
): { readonly violations: ReadonlyArray<Violation>; readonly unsigned: number } => {
  const violations: Array<Violation> = []
  let unsigned = 0
  for (const r of signers) {
    if (kernelKeys === undefined) {
      if (r.key === undefined) unsigned++
    } else if (r.key === undefined || !kernelKeys.trusts(r.key, r.seq)) {
      violations.push({ check: "archive", held_id: "_archive", seqs: [r.seq], message: `archive record seq ${r.seq} is ${r.key === undefined ? "unsigned" : "signed by a key the trust root does not list as a kernel key"}: the purge it names is not authorized` })
    }
  }
  return { violations, unsigned }
}
