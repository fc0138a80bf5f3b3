import { checkpointDigest, checkpointSignatureValid, decodeCheckpoint } from "../schema/Checkpoint.js"
import { Either, Schema } from "effect"
import { canonicalize, jcsDigest } from "../schema/Canonical.js"
import { decodeCommitBytes } from "../schema/Commit.js"
import { commitChain, type ChainLink } from "./checks/CommitChain.js"
import { kernelKeysOf } from "./KernelKeys.js"
import type { Envelope } from "../schema/Envelope.js"
import { auditHistories } from "./Audit.js"
import type { CheckResult } from "./AuditReport.js"
import { ExportDocument } from "./ExportDocument.js"
import { documentSignatureValid } from "../ledger/KernelKey.js"
import { policyHistory } from "./PolicyHistory.js"
import type { TrustRoot } from "./TrustRoot.js"
import type { DeliveryMessage } from "./checks/Check.js"

/** What `verifyExport` concluded. */
export interface ExportVerification {
  readonly ok: boolean
  /** Whether a trust root vouched for the signer (otherwise only the document's own keys were used). */
  readonly rooted: boolean
  /** Problems with the document itself (format, digest, keys). */
  readonly problems: ReadonlyArray<string>
  /** The pure audit checks over the exported history (signatures, binding, effect safety, delivery). */
  readonly checks: ReadonlyArray<CheckResult>
}

/**
 * Verifies an exported held call offline, with nothing but the document (its public keys and
 * registry): the events digest, that every envelope's key is among the exported keys of its
 * principal, and every pure audit check over the history, the same code `wk audit replay` runs.
 * A signed export's signature must verify; with a trust root it must be signed, by a kernel
 * key the root lists: only then are the exported registry and keys more than the document's word.
 */
export const verifyExport = (input: unknown, trust?: TrustRoot): ExportVerification => {
  const decoded = Schema.decodeUnknownEither(ExportDocument)(input)
  if (Either.isLeft(decoded)) return { ok: false, rooted: false, problems: [`not an export document: ${decoded.left.message.slice(0, 300)}`], checks: [] }
  const doc = decoded.right
  const problems: Array<string> = []
  // Over the events as given, so a field this version does not know still counts.
  if (jcsDigest((input as { readonly events: unknown }).events) !== doc.events_digest) problems.push("events_digest does not match the events")
  // The digest is only a checksum: what makes the document evidence is the kernel key's signature.
  const sig = doc.signature
  if (sig !== undefined && !documentSignatureValid(input as Record<string, unknown>, sig)) problems.push("the signature does not verify over the document")
  // Signed commits make the events evidence on their own; a document signature vouches for the rest.
  const chain = doc.commits === undefined ? undefined : commitProblems(doc, (input as { readonly events: unknown }).events, trust)
  if (chain !== undefined) problems.push(...chain.problems)
  if (trust !== undefined) {
    if (sig !== undefined && !trust.kernel_keys.includes(sig.key)) problems.push(`the export is signed by ${sig.key}, not a kernel key of the trust root`)
    else if (sig === undefined && chain?.signed !== true) problems.push("the export is not signed and its commits are not all signed by the kernel, and a trust root was given")
  }
  problems.push(...checkpointProblems(doc, trust))
  problems.push(...addressProblems(doc.events))
  for (const { seq, index, event } of doc.events) {
    if (event.held_id !== doc.held_id) problems.push(`seq ${seq} index ${index}: an event of ${event.held_id} in the export of ${doc.held_id}`)
    const env: Envelope | undefined = "envelope" in event ? event.envelope : undefined
    if (env === undefined) continue
    const principal = String(env.payload["principal"])
    if (!(doc.keys[principal] ?? []).includes(env.key)) problems.push(`seq ${seq} index ${index}: the key of ${principal} is not among the exported keys`)
  }
  const policy = policyHistory(
    doc.registry.map((r) => ({ type: "policy.applied" as const, event_id: `policy.applied:e${r.epoch}`, epoch: r.epoch, at: r.at, profiles: [{ name: `registry@e${r.epoch}`, principals: r.principals }] }))
  )
  const newest = doc.events.reduce((t, e) => Math.max(t, Date.parse(e.event.at)), 0)
  const deliveries = doc.deliveries === undefined ? undefined : new Map<string, ReadonlyArray<DeliveryMessage>>([[doc.held_id, doc.deliveries]])
  const { checks } = auditHistories([{ heldId: doc.held_id, events: doc.events }], {
    policy,
    newestAt: Math.max(newest, Date.parse(doc.exported_at)),
    settleMs: 30_000,
    ...(deliveries !== undefined ? { deliveries } : {})
  })
  const violations = checks.reduce((n, c) => n + c.violations.length, 0)
  return { ok: problems.length === 0 && violations === 0, rooted: trust !== undefined, problems, checks }
}

/**
 * The exported commits: each decodes, forms the call's chain (`commit-chain`, with the trust
 * root's kernel keys when given), and together they hold exactly the exported events at their
 * addresses. `signed`: every commit is signed by a trusted kernel key.
 */
const commitProblems = (doc: ExportDocument, events: unknown, trust: TrustRoot | undefined): { readonly problems: ReadonlyArray<string>; readonly signed: boolean } => {
  const problems: Array<string> = []
  const links: Array<ChainLink> = []
  const fromCommits: Array<unknown> = []
  for (const c of doc.commits ?? []) {
    const data = new TextEncoder().encode(c.stored)
    try {
      const commit = decodeCommitBytes(data)
      links.push({ seq: c.seq, data, commit })
      const stored = (JSON.parse(c.stored) as { readonly events: ReadonlyArray<unknown> }).events
      stored.forEach((event, index) => fromCommits.push({ seq: c.seq, index, event }))
    } catch (e) {
      problems.push(`the commit at seq ${c.seq} does not decode: ${String(e).slice(0, 200)}`)
    }
  }
  // A document signed by the kernel vouches for its commits; otherwise they must carry the kernel's signatures.
  const keys = trust !== undefined && trust.kernel_keys.length > 0 && doc.signature === undefined ? kernelKeysOf(trust.kernel_keys, []) : undefined
  const chain = commitChain(doc.held_id, links, keys)
  for (const v of chain.violations) problems.push(`commit-chain: ${v.message}`)
  if (canonicalize(fromCommits) !== canonicalize(events)) problems.push("the events are not exactly the exported commits' events")
  const signed = keys !== undefined && links.length > 0 && chain.violations.length === 0 && chain.unsigned === 0
  return { problems, signed }
}

/**
 * `checkpoints`: each exported checkpoint decodes and its signature verifies (with a trust root's
 * kernel keys, under one of them), and names this call's head in its range: the exported commits
 * must hold that commit, byte for byte (its digest), and no commit of the call after it up to the
 * checkpoint's `last_seq`. A commit left out of the export (with its events) before the newest
 * checkpoint is caught; commits after it are not covered.
 */
const checkpointProblems = (doc: ExportDocument, trust: TrustRoot | undefined): Array<string> => {
  const problems: Array<string> = []
  const commits = new Map((doc.commits ?? []).map((c) => [c.seq, c.stored]))
  for (const x of doc.checkpoints ?? []) {
    const d = decodeCheckpoint(new TextEncoder().encode(x.stored))
    if (Either.isLeft(d)) {
      problems.push(`checkpoints: seq ${x.seq} is not a checkpoint: ${d.left.message.slice(0, 200)}`)
      continue
    }
    const c = d.right
    if (!checkpointSignatureValid(c)) problems.push(`checkpoints: checkpoint seq ${x.seq}'s signature does not verify under its key`)
    else if (trust !== undefined && trust.kernel_keys.length > 0 && !trust.kernel_keys.includes(c.key)) problems.push(`checkpoints: checkpoint seq ${x.seq} is signed by a key the trust root does not list as a kernel key`)
    const head = c.heads.find((h) => h[0] === doc.held_id)
    if (head === undefined) {
      problems.push(`checkpoints: checkpoint seq ${x.seq} does not name ${doc.held_id}`)
      continue
    }
    const [, seq, digest] = head
    const stored = commits.get(seq)
    if (stored === undefined) problems.push(`checkpoints: checkpoint seq ${x.seq} names ${doc.held_id}'s commit at seq ${seq}, which the export does not hold: commits were left out`)
    else if (checkpointDigest(new TextEncoder().encode(stored)) !== digest) problems.push(`checkpoints: checkpoint seq ${x.seq} names another commit at seq ${seq} than the exported one: it was changed`)
    const later = [...commits.keys()].filter((s) => s > seq && s <= c.last_seq)
    if (later.length > 0) problems.push(`checkpoints: the export holds commits at seq ${later.join(", ")} in checkpoint seq ${x.seq}'s range after the head it names: they were added`)
  }
  return problems
}

/**
 * Events must come in address order, and the events of one commit with indexes 0, 1, 2, ...:
 * a gap is an event left out of its commit, a repeat an event added to it.
 */
const addressProblems = (events: ReadonlyArray<{ readonly seq: number; readonly index: number }>): Array<string> => {
  const problems: Array<string> = []
  let seq = 0
  let next = 0
  for (const e of events) {
    if (e.seq < seq) problems.push(`seq ${e.seq} comes after seq ${seq}: events are not in stream order`)
    if (e.seq !== seq) {
      seq = e.seq
      next = 0
    }
    if (e.index < next) problems.push(`seq ${e.seq}: index ${e.index} repeats`)
    else if (e.index > next) problems.push(`seq ${e.seq}: index ${e.index} comes where index ${next} should (indexes ${next}..${e.index - 1} are missing)`)
    next = Math.max(next, e.index + 1)
  }
  return problems
}
