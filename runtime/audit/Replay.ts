import { standingSubjectOf } from "../schema/StandingGrant.js"
import { Effect, Either, Layer, Schema } from "effect"
import { layerNats, Nats, type NatsOptions } from "../ledger/Nats.js"
import { parseCommit } from "./internal/fastDecode.js"
import { makeSignatureVerifier } from "./internal/SignatureVerifier.js"
import type { Commit } from "../schema/Commit.js"
import type { SequencedEvent } from "../schema/Events.js"
import { HeldCallFacts } from "../schema/Facts.js"
import { PolicyApplied } from "../schema/PolicyApplied.js"
import { Buckets, Streams } from "../schema/Subjects.js"
import { auditError, AuditError } from "./AuditError.js"
import { auditCall, auditTally, skipped, tally, type AuditedCall } from "./Audit.js"
import type { AuditReport, CheckResult, ProjectionSummary, Violation } from "./AuditReport.js"
import { makePinnedWasmLoader } from "./PluginObjects.js"
import { DefaultRegistrySkewMs, policyHistory, type PolicyHistory } from "./PolicyHistory.js"
import { startupDigest } from "./TrustRoot.js"
import { readOrdered, readSubject, streamLayout, type RawMessage, type ReadProgress } from "./StreamReader.js"
import { CheckpointSubject } from "../schema/Checkpoint.js"
import { KeyRotationSubject } from "../schema/KeyRotation.js"
import { kernelKeysOf, type KernelKeys } from "./KernelKeys.js"
import { sha256Hex } from "../schema/Canonical.js"
import { checkpointsCheck, type HistoryMessage } from "./checks/Checkpoints.js"
import { appliedUsesOf, commitChain, compareProjection, rerunPlugins, standingCheck, type AppliedUse, type ChainLink, type CheckContext, type GrantMessage } from "./checks/index.js"
import type { DeliveryMessage } from "./checks/Check.js"
import { readDeliveries } from "./Deliveries.js"
import { readArchives } from "./Archives.js"
import { PluginBucket } from "../ledger/PluginStore.js"
import type { HeldEvent } from "../schema/Events.js"
import { recordPlacement } from "./RecordPlacement.js"
import type { TrustRoot } from "./TrustRoot.js"
import { trustedRegistry, type PolicyRecord } from "./TrustedRegistry.js"

/** Which part of the log to audit. Calls touched by the range are audited from their first event. */
export type Selection = { readonly fromSeq: number } | { readonly since: Date } | { readonly held: string }

export interface ReplayOptions {
  /** The events stream (default `WK_EVENTS`); a copy with another subject prefix works too. */
  readonly stream?: string
  /** Default: the whole stream. */
  readonly selection?: Selection
  /** The projection bucket to compare with (default `wk_facts`); null skips the comparison. */
  readonly factsBucket?: string | null
  /** The deliveries stream (default `WK_SESSIONS`); null skips reading it. */
  readonly sessionsStream?: string | null
  /** Re-run recorded plugin decisions from the pinned wasm (`plugin-rerun`; default true, false leaves them unverified). */
  readonly rerunPlugins?: boolean
  /** The plugin object store (default `wk_plugins`). */
  readonly pluginBucket?: string
  /** Tolerance around policy changes (see PolicyHistory). */
  readonly registrySkewMs?: number
  /**
   * How far the server's store time of a commit may be from its events' time (default 5 min):
   * a history rebuilt later is stored at rebuild time (`store-time`).
   */
  readonly storeSkewMs?: number
  /** How long outstanding kernel work may take before it counts as missed (default 30 s). */
  readonly settleMs?: number
  /** Worker threads verifying signatures during the read (default: none on one core, else cores - 1, 2 to 4; 0: main thread). */
  readonly verifyWorkers?: number
  /**
   * The trust root the auditor holds out of band. Without one the first policy record is
   * trusted as found and the report says the replay is unanchored.
   */
  readonly trust?: TrustRoot
  /** A checkpoint the auditor kept elsewhere (`wk audit checkpoint --out`): it must be in the stream's checkpoint chain. */
  readonly keptCheckpoint?: Uint8Array
  /** Checkpoints anchored outside the stream (`wk audit anchor pull`): each must be in the stream's checkpoint chain. */
  readonly anchored?: ReadonlyArray<Uint8Array>
  /** Called about once a second during long reads. */
  readonly onProgress?: (p: ReadProgress & { readonly phase: string }) => void
}

const StandingPrefix = standingSubjectOf("")
const decodePolicy = Schema.decodeUnknownEither(Schema.parseJson(PolicyApplied))
const decodeFacts = Schema.decodeUnknownEither(HeldCallFacts)
const text = new TextDecoder()

/**
 * `wk audit replay` as a library: reads the events stream (ordered consumer), rebuilds the
 * principal registry from `policy.applied` records, re-folds every selected held call with the
 * kernel's reducer, runs every check, compares with the KV projection, and reports. Never
 * writes anything; works with the read-only auditor credentials.
 */
export const replay = (options: ReplayOptions = {}): Effect.Effect<AuditReport, AuditError, Nats> =>
  Effect.scoped(Effect.gen(function* () {
    const t0 = Date.now()
    const stream = options.stream ?? Streams.events
    const selection = options.selection ?? { fromSeq: 1 }
    // Taken before the stream's bounds are read, less a margin for the server's clock: a delivery
    // stored before it follows commits the read below holds; one stored later may not.
    const eventsReadAt = Date.now() - StoreClockMarginMs
    const layout = yield* streamLayout(stream)
    const streamViolations: Array<Violation> = []
    const fail = (held_id: string, seqs: ReadonlyArray<number>, message: string) => void streamViolations.push({ check: "stream", held_id, seqs: [...seqs], message })
    // Archived calls' events were purged from the stream: the gaps they leave are accounted for
    // by the archive records (and each archive is verified against its digest).
    const archived = yield* readArchives(stream, layout.prefix, "held" in selection ? selection.held : undefined)
    const archiveViolations: Array<Violation> = [...archived.violations]
    let hotArchived = 0
    const unarchived = (from: number, to: number) => unarchivedIn(archived.seqs, from, to)

    const policyMsgs = yield* readSubject(stream, `${layout.prefix}_policy`)
    const records: Array<PolicyRecord> = []
    for (const m of policyMsgs) {
      const body = text.decode(m.data)
      const r = decodePolicy(body)
      if (Either.isRight(r)) records.push({ ...r.right, seq: m.seq, stored: m.time, profiles_digest: startupDigest((JSON.parse(body) as { profiles: unknown }).profiles) })
      else fail("_policy", [m.seq], `a policy record does not decode: ${r.left.message.slice(0, 200)}`)
    }
    // A witnessed policy change is authorized by its call's signed proposal and approvals.
    const witnessed = new Map<string, ReadonlyArray<HeldEvent>>()
    for (const r of records) {
      const by = r.applied_by
      if (by === undefined || !("held_id" in by) || witnessed.has(by.held_id)) continue
      const hot = yield* readSubject(stream, `${layout.prefix}${by.held_id}`)
      const msgs = [...hot, ...(archived.byHeld.get(by.held_id) ?? []).filter((m) => !hot.some((h) => h.seq === m.seq))]
      witnessed.set(by.held_id, msgs.flatMap((m) => { try { return [...parseCommit(m.data).events] } catch { return [] } }))
    }
    const registry = trustedRegistry(records, options.trust !== undefined ? { _tag: "root", root: options.trust } : { _tag: "first-record" }, (id) => witnessed.get(id))
    const skewMs = options.registrySkewMs ?? DefaultRegistrySkewMs
    const policy = policyHistory(registry.records, skewMs)
    const placement = recordPlacement(records, skewMs)

    // Messages are kept as bytes while the stream is read: each call is decoded, re-folded and
    // checked in one go afterwards, so its objects die young. Envelopes are verified on worker
    // threads meanwhile; a call is checked once its verdicts are in.
    const calls = new Map<string, CallLog>()
    const verifier = yield* Effect.acquireRelease(Effect.sync(() => makeSignatureVerifier(options.verifyWorkers)), (v) => Effect.promise(() => v.finish()))
    const submit = (log: CallLog, m: RawMessage) => {
      // A body without these bytes has no envelope key, short of a JSON escape in the key: such an
      // envelope gets no verdict here and the signatures check verifies it on the main thread.
      if (indexOf.call(m.data, EnvelopeKey) < 0) return
      verifier.submit(m.seq, m.data)
      log.signed.push(m.seq)
    }
    // Checkpoints, and the policy and archive records their heads cover besides the calls.
    const checkpointMsgs: Array<RawMessage> = []
    const recordMsgs: Array<HistoryMessage> = []
    const rotationMsgs: Array<RawMessage> = []
    // The server's store time of each call commit read from the stream: which registry judges a
    // signed request comes from the store's order and time, not from the time the request claims.
    const storeTimes = new Map<number, number>()
    let events = 0
    let prevSeq = 0
    let firstSeq = 0
    let lastSeq = 0
    const take = (m: RawMessage, contiguous: boolean) => {
      events++
      if (firstSeq === 0) firstSeq = m.seq
      lastSeq = m.seq
      if (contiguous && prevSeq !== 0 && m.seq !== prevSeq + 1) {
        const missing = unarchived(prevSeq + 1, m.seq)
        if (missing.length > 0) fail("", missing, `sequences ${prevSeq + 1}..${m.seq - 1} are missing from ${stream} (not archived: ${missing.length > 99 ? "100 or more" : missing.length})`)
      }
      if (archived.seqs.has(m.seq)) hotArchived++
      prevSeq = m.seq
      const heldId = m.subject.startsWith(layout.prefix) ? m.subject.slice(layout.prefix.length) : m.subject
      if (heldId === CheckpointSubject) return void checkpointMsgs.push(m)
      // Records (`_policy`, `_archive`, `_keys`): not calls, but covered by the checkpoints' heads.
      if (heldId.startsWith("_")) {
        recordMsgs.push({ name: heldId, seq: m.seq, data: m.data })
        if (heldId === KeyRotationSubject) rotationMsgs.push(m)
        return
      }
      let log = calls.get(heldId)
      if (log === undefined) calls.set(heldId, (log = { heldId, messages: [], signed: [] }))
      log.messages.push(m)
      if (m.time > 0) storeTimes.set(m.seq, m.time)
      submit(log, m)
    }

    const progress = options.onProgress
    if ("held" in selection) {
      for (const m of yield* readSubject(stream, `${layout.prefix}${selection.held}`)) take(m, false)
    } else {
      const start = "fromSeq" in selection ? { fromSeq: Math.max(selection.fromSeq, layout.firstSeq) } : { since: selection.since }
      yield* readOrdered(stream, start, layout.lastSeq, (m) => take(m, true), progress && ((p) => progress({ ...p, phase: "events" })))
      if ("fromSeq" in selection && selection.fromSeq < layout.firstSeq && unarchived(Math.max(1, selection.fromSeq), layout.firstSeq).length > 0) fail("", [], `the selection starts at ${selection.fromSeq}, but ${stream} begins at ${layout.firstSeq} (earlier messages were purged)`)
    }
    verifier.flush()
    if ("held" in selection && calls.size === 0 && !archived.byHeld.has(selection.held)) {
      return yield* new AuditError({ operation: "select", message: `no such held call: ${selection.held} has no events in ${stream} or its archives` })
    }

    // Calls the range touched are folded from their first event.
    let backfilled = 0
    if (firstSeq > layout.firstSeq && !("held" in selection)) {
      yield* Effect.forEach(
        [...calls.values()],
        (log) =>
          Effect.map(readSubject(stream, `${layout.prefix}${log.heldId}`, 1, firstSeq), (earlier) => {
            if (earlier.length === 0) return
            backfilled += earlier.length
            for (const m of earlier) {
              if (m.time > 0) storeTimes.set(m.seq, m.time)
              submit(log, m)
            }
            log.messages.unshift(...earlier)
          }),
        { concurrency: 16, discard: true }
      )
      verifier.flush()
    }

    // Archived events of the selected calls (all of them for a read from the start) join the
    // stream's, in sequence order; a sequence in both must be the same bytes.
    let archivedCommits = 0
    const fromStart = "fromSeq" in selection ? selection.fromSeq : Number.POSITIVE_INFINITY
    for (const [heldId, msgs] of archived.byHeld) {
      const selected = "held" in selection ? heldId === selection.held : calls.has(heldId) || msgs.some((m) => m.seq >= fromStart)
      if (!selected) continue
      let log = calls.get(heldId)
      if (log === undefined) calls.set(heldId, (log = { heldId, messages: [], signed: [] }))
      const bySeq = new Map(log.messages.map((m) => [m.seq, m]))
      for (const m of msgs) {
        const hot = bySeq.get(m.seq)
        if (hot === undefined) {
          bySeq.set(m.seq, m)
          submit(log, m)
          archivedCommits++
        } else if (Buffer.compare(Buffer.from(hot.data), Buffer.from(m.data)) !== 0) {
          archiveViolations.push({ check: "archive", held_id: heldId, seqs: [m.seq], message: `seq ${m.seq} differs between ${stream} and its archive` })
        }
      }
      log.messages.splice(0, log.messages.length, ...[...bySeq.values()].sort((a, b) => a.seq - b.seq))
    }
    verifier.flush()
    const explained = [...archived.seqs].filter((q) => q >= layout.firstSeq && q <= layout.lastSeq).length - hotArchived
    if (layout.deleted > explained) fail("", [], `${layout.deleted - explained} message(s) were deleted from ${stream} (${Math.max(0, explained)} more left it archived)`)

    const sessions = options.sessionsStream === undefined ? Streams.sessions : options.sessionsStream
    const deliveries = sessions === null ? { _tag: "skipped" as const, note: "sessions stream not read (disabled)" } : yield* readDeliveries(sessions, calls)

    const logs = [...calls.values()]
    /** Per call, once decoded: the time of its last event that decodes (null: none does). */
    const lastAt: Array<number | null | undefined> = new Array(logs.length)
    let newestAt: number | undefined
    const ctx: CheckContext = {
      policy,
      // Only the delivery check of an ended, undelivered call asks: most replays never compute it.
      get newestAt() {
        if (newestAt === undefined) {
          newestAt = 0
          for (let i = 0; i < logs.length; i++) {
            const t = lastAt[i] ?? lastAtOf(logs[i]!)
            if (t !== null) newestAt = Math.max(newestAt, t)
          }
        }
        return newestAt
      },
      settleMs: options.settleMs ?? 30_000,
      eventsReadAt,
      // A worker answers per commit: true when every envelope in it verifies; otherwise the
      // check verifies each envelope of that commit itself.
      verified: (seq) => (verifier.verdict(seq) === true ? true : undefined),
      storedAt: (seq) => storeTimes.get(seq) ?? 0,
      ...(deliveries._tag === "read" ? { deliveries: deliveries.byHeld, deliveriesFrom: deliveries.from } : {})
    }
    // Calls whose verdicts are in are checked while the workers verify the rest; results are
    // tallied in stream order whatever order they were checked in.
    const audited: Array<{ readonly stream: ReadonlyArray<Violation>; readonly call?: AuditedCall }> = new Array(logs.length)
    // A selection reads only its calls: rotation records are read on their own subject then.
    const rotations = wholeStreamSelected(selection) ? rotationMsgs : yield* readSubject(stream, `${layout.prefix}${KeyRotationSubject}`)
    const kernelKeys = options.trust !== undefined && options.trust.kernel_keys.length > 0 ? kernelKeysOf(options.trust.kernel_keys, rotations) : undefined
    // A purge is authorized by a record the kernel signed: with the root's kernel keys, any other
    // record's purge is a violation (an attacker who may purge cannot also sign).
    let unsignedArchives = 0
    for (const r of archived.signers) {
      if (kernelKeys === undefined) {
        if (r.key === undefined) unsignedArchives++
      } else if (r.key === undefined || !kernelKeys.trusts(r.key, r.seq)) {
        archiveViolations.push({ check: "archive", held_id: "_archive", seqs: [r.seq], message: `archive record seq ${r.seq} is ${r.key === undefined ? "unsigned" : "signed by a key the trust root does not list as a kernel key"}: the purge it names is not authorized` })
      }
    }
    const deliveryChain = { violations: [] as Array<Violation>, unsigned: 0, unchained: 0 }
    const chains = tally()
    const chainGaps = { unchained: 0, unsigned: 0, unanchored: 0 }
    const storeSkewMs = options.storeSkewMs ?? DefaultStoreSkewMs
    const storeTimeViolations: Array<Violation> = []
    let storeTimed = 0
    let waiting = logs.map((_, i) => i)
    while (waiting.length > 0) {
      const later: Array<number> = []
      for (const i of waiting) {
        const log = logs[i]!
        if (!log.signed.every(verifier.answered)) {
          later.push(i)
          continue
        }
        const d = decodeLog(log, storeSkewMs)
        if (d.storeTime.length > 0) storeTimeViolations.push(...d.storeTime)
        storeTimed += d.storeTimed
        const delivered = ctx.deliveries?.get(log.heldId)
        if (delivered !== undefined) deliveryChainOf(log.heldId, d.links, delivered, kernelKeys, deliveryChain)
        const chain = commitChain(log.heldId, d.links, kernelKeys)
        chains.add("commit-chain", chain)
        if (chain.unchained) chainGaps.unchained++
        chainGaps.unsigned += chain.unsigned
        chainGaps.unanchored += chain.unanchored
        for (const e of d.events) {
          placement.see(e.seq, e.event.at)
          if ("policy_epoch" in e.event) placement.claim(e.seq, log.heldId, e.event.policy_epoch, e.event.at)
        }
        const last = d.events[d.events.length - 1]
        lastAt[i] = last === undefined ? null : Date.parse(last.event.at)
        audited[i] = last === undefined ? { stream: d.violations } : { stream: d.violations, call: auditCall({ heldId: log.heldId, events: d.events }, ctx) }
      }
      if (later.length > 0) yield* Effect.promise(() => verifier.next())
      waiting = later
    }
    const tallied = auditTally({ keepSteps: options.rerunPlugins !== false && hasPluginDecision })
    let heldCalls = 0
    const applied: Array<AppliedUse> = []
    for (const a of audited) {
      if (a.stream.length > 0) streamViolations.push(...a.stream)
      if (a.call === undefined) continue
      heldCalls++
      applied.push(...appliedUsesOf(a.call.call))
      tallied.add(a.call)
    }
    // Standing approvals: every grant in a whole-stream read, else those the selected calls used.
    const grantMessages = new Map<string, Array<GrantMessage>>()
    if (wholeStreamSelected(selection)) {
      for (const m of recordMsgs) if (m.name.startsWith(StandingPrefix)) grantMessages.set(m.name.slice(StandingPrefix.length), [...(grantMessages.get(m.name.slice(StandingPrefix.length)) ?? []), m])
    } else {
      for (const id of new Set(applied.map((a) => a.event.grant_id))) grantMessages.set(id, [...(yield* readSubject(stream, `${layout.prefix}${standingSubjectOf(id)}`))])
    }
    const standing = standingCheck(grantMessages, applied, policy, wholeStreamSelected(selection))
    const traced = tallied.traced
    const checks = tallied.results(ctx)
    const held = checks.map((c) =>
      c.name !== "delivery"
        ? c
        : deliveries._tag === "skipped"
          ? { ...c, note: deliveries.note }
          : withViolations({ ...c, ...deliveryNote(deliveryChain, kernelKeys !== undefined, c.note) }, deliveryChain.violations)
    )

    const projection = options.factsBucket === null ? null : yield* compareAll(options.factsBucket ?? Buckets.facts, traced)
    const projectionCheck: CheckResult =
      projection === null
        ? skipped("projection", "projection comparison disabled")
        : projection._tag === "unreadable"
          ? skipped("projection", projection.note)
          : {
              name: "projection",
              status: projection.violations.length > 0 ? "failed" : "passed",
              checked: traced.length,
              violations: projection.violations,
              unverified: [],
              note: `matched ${projection.summary.matched}, lagging ${projection.summary.lagging}, ahead ${projection.summary.ahead}, missing ${projection.summary.missing}`
            }

    const pinCheck = yield* checkPins(policy, options.pluginBucket ?? PluginBucket)

    let pluginCheck: CheckResult = skipped("plugin-rerun", "not re-run (--no-rerun): recorded plugin decisions are unverified")
    if (options.rerunPlugins !== false) {
      const bucket = options.pluginBucket ?? PluginBucket
      const anyDecision = traced.some((c) => c.steps.some((s) => "decisions" in s.event && s.event.decisions.some((d) => d.digest !== undefined)))
      const loader = anyDecision ? yield* Effect.either(makePinnedWasmLoader(bucket)) : undefined
      if (!anyDecision) pluginCheck = { ...skipped("plugin-rerun", "no recorded plugin decision in the selection"), status: "passed" }
      else if (loader !== undefined && Either.isLeft(loader)) pluginCheck = skipped("plugin-rerun", `cannot read the plugin object store: ${loader.left.message}`)
      else if (loader !== undefined && Either.isRight(loader)) {
        const t = tally()
        const rerun = yield* rerunPlugins(traced, ctx, loader.right)
        t.add("plugin-rerun", rerun)
        pluginCheck = t.result("plugin-rerun", `${rerun.checked - rerun.reused} re-run(s); ${rerun.reused} decision(s) identical to one re-run already`)
      }
    }

    const checkpointCheck: CheckResult = wholeStreamSelected(selection)
      ? checkpointsCheck(checkpointMsgs, historyOf(logs, recordMsgs), layout.lastSeq, kernelKeys, [...(options.anchored ?? []), ...(options.keptCheckpoint !== undefined ? [options.keptCheckpoint] : [])])
      : skipped("checkpoints", "checkpoints are checked by a replay of the whole stream")

    const registryFinding = placement.finding()
    const registryViolations = [...registry.finding.violations, ...registryFinding.violations]
    const all: Array<CheckResult> = [
      {
        name: "registry",
        status: registryViolations.length > 0 ? "failed" : registry.finding.unverified.length > 0 ? "pending" : "passed",
        checked: registry.finding.checked,
        violations: registryViolations,
        unverified: registry.finding.unverified,
        note: registry.anchor
      },
      { name: "stream", status: streamViolations.length > 0 ? "failed" : "passed", checked: events + backfilled, violations: streamViolations, unverified: [] },
      {
        name: "archive",
        status: archiveViolations.length > 0 ? "failed" : "passed",
        checked: archived.records,
        violations: archiveViolations,
        unverified: [],
        note: `${archived.records} archive(s) verified against their SHA-256; ${archivedCommits} archived commit(s) replayed${unsignedArchives > 0 ? `; ${unsignedArchives} archive record(s) unsigned (pass --trust with kernel_keys to require signed purges)` : ""}`
      },
      withViolations(chains.result("commit-chain", chainNote(chainGaps, kernelKeys !== undefined)), kernelKeys?.violations ?? []),
      checkpointCheck,
      {
        name: "store-time",
        status: storeTimeViolations.length > 0 ? "failed" : "passed",
        checked: storeTimed,
        violations: storeTimeViolations,
        unverified: [],
        note: `store times within ${Math.round(storeSkewMs / 1000)} s of their events' time (archived commits carry none)`
      },
      ...held,
      standing,
      projectionCheck,
      pinCheck,
      pluginCheck
    ]
    const violations = all.reduce((n, c) => n + c.violations.length, 0)
    const duration = Date.now() - t0
    return {
      ok: violations === 0,
      stream,
      selection: "held" in selection ? { held: selection.held } : "since" in selection ? { since: selection.since.toISOString() } : { from_seq: selection.fromSeq },
      first_seq: firstSeq,
      last_seq: lastSeq,
      events,
      backfilled,
      archived: archivedCommits,
      held_calls: heldCalls,
      policy_epochs: policy.epochs.map((e) => e.epoch),
      anchored: registry.anchored,
      anchor: registry.anchor,
      duration_ms: duration,
      events_per_second: Math.round(((events + backfilled) / Math.max(1, duration)) * 1000),
      checks: all,
      projection: projection === null || projection._tag === "unreadable" ? null : projection.summary,
      violations
    } satisfies AuditReport
  }))

/** `replay` over its own connection (the CLI's entry point). */
export const replayOver = (nats: NatsOptions, options: ReplayOptions = {}): Effect.Effect<AuditReport, AuditError> =>
  replay(options).pipe(Effect.provide(Layer.mapError(layerNats({ name: "wk-auditor", ...nats }), auditError("connect"))))

/** The raw messages of one held call as read, and the seqs of those sent to the verifier. */
interface CallLog {
  readonly heldId: string
  readonly messages: Array<RawMessage>
  readonly signed: Array<number>
}

/** A call's messages decoded: the events that decode, the commits that do (for the chain), and a stream violation for each that does not. */
interface DecodedLog {
  readonly events: ReadonlyArray<SequencedEvent>
  readonly links: ReadonlyArray<ChainLink>
  readonly violations: ReadonlyArray<Violation>
  /** `store-time` violations: commits stored far from their events' time. */
  readonly storeTime: ReadonlyArray<Violation>
  /** Commits whose store time was compared (archived ones carry none). */
  readonly storeTimed: number
}

/** How far the NATS server's clock may be behind the auditor's when their times are compared. */
const StoreClockMarginMs = 1000

/** Default tolerance between a commit's store time and its events' time. */
export const DefaultStoreSkewMs = 5 * 60_000

const EnvelopeKey = Buffer.from('"envelope"')
// Buffer's native search works on any Uint8Array: no Buffer view per message.
const indexOf = Buffer.prototype.indexOf as (this: Uint8Array, value: Uint8Array) => number

/**
 * Each message is one commit: its events, addressed (seq, index), join the call's history. A
 * commit that does not decode, a commit or an event naming another held call than the subject's,
 * and an event id repeated inside one commit (the kernel never writes one) are stream violations.
 */
const decodeLog = (log: CallLog, storeSkewMs: number): DecodedLog => {
  const events: Array<SequencedEvent> = []
  const links: Array<ChainLink> = []
  const violations: Array<Violation> = []
  const storeTime: Array<Violation> = []
  let storeTimed = 0
  const fail = (seq: number, message: string) => void violations.push({ check: "stream", held_id: log.heldId, seqs: [seq], message })
  for (const m of log.messages) {
    let commit: Commit
    try {
      commit = parseCommit(m.data)
    } catch (e) {
      fail(m.seq, `a commit does not decode: ${String(e).slice(0, 200)}`)
      continue
    }
    links.push({ seq: m.seq, data: m.data, commit })
    if (m.time > 0) {
      storeTimed++
      const at = Date.parse(commit.events[commit.events.length - 1]!.at)
      const off = m.time - at
      if (Number.isFinite(at) && Math.abs(off) > storeSkewMs) {
        storeTime.push({
          check: "store-time",
          held_id: log.heldId,
          seqs: [m.seq],
          message: off > 0
            ? `seq ${m.seq} was stored ${Math.round(off / 1000)} s after its events' time: the commit was written again later (a rebuilt history), or a clock is off`
            : `seq ${m.seq} was stored ${Math.round(-off / 1000)} s before its events' time: its events' time was changed, or a clock is off`
        })
      }
    }
    if (commit.held_id !== log.heldId) fail(m.seq, `a commit of ${commit.held_id} is stored on the subject of ${log.heldId}`)
    const ids = new Map<string, number>()
    for (let index = 0; index < commit.events.length; index++) {
      const event = commit.events[index]!
      if (event.held_id !== log.heldId) fail(m.seq, `seq ${m.seq} index ${index}: an event of ${event.held_id} is stored on the subject of ${log.heldId}`)
      const earlier = ids.get(event.event_id)
      if (earlier !== undefined) fail(m.seq, `seq ${m.seq} index ${index}: repeats event ${event.event_id} of index ${earlier} in the same commit`)
      else ids.set(event.event_id, index)
      events.push({ seq: m.seq, index, event })
    }
  }
  return { events, links, violations, storeTime, storeTimed }
}

/**
 * Each delivery of a call in `WK_SESSIONS` against the call's commits: a signature that does not
 * verify, a key the trust root does not list (with `kernel_keys`), or a `prev` that is not the
 * digest of the call's commit at `prev_seq` is a `delivery` violation; unsigned deliveries are a
 * violation with `kernel_keys`, else counted, as are signed ones whose process did not hold `prev`.
 */
const deliveryChainOf = (
  heldId: string,
  links: ReadonlyArray<ChainLink>,
  delivered: ReadonlyArray<DeliveryMessage>,
  kernelKeys: KernelKeys | undefined,
  out: { readonly violations: Array<Violation>; unsigned: number; unchained: number }
): void => {
  const fail = (m: DeliveryMessage, message: string) => void out.violations.push({ check: "delivery", held_id: heldId, seqs: [], message: `delivery ${m.delivery_id} (WK_SESSIONS seq ${m.seq}) ${message}` })
  for (const m of delivered) {
    const c = m.chain
    if (c === undefined) {
      if (kernelKeys !== undefined) fail(m, "is not signed by the kernel: anyone who may write WK_SESSIONS could have written it")
      else out.unsigned++
      continue
    }
    if (!c.valid) fail(m, "carries a signature that does not verify: it was changed after the kernel signed it")
    else if (kernelKeys !== undefined && !kernelKeys.keys.includes(c.key)) fail(m, "is signed by a key the trust root does not list as a kernel key")
    if (c.prev === "") {
      out.unchained++
      continue
    }
    const link = links.find((l) => l.seq === c.prev_seq)
    if (link === undefined) fail(m, `was made from the call's commit at seq ${c.prev_seq}, which its history does not hold`)
    else if (sha256Hex(link.data) !== c.prev) fail(m, `was made from a commit at seq ${c.prev_seq} other than the one stored there`)
  }
}

/** What the delivery check could not prove about the deliveries' signatures and chain. */
const deliveryNote = (d: { readonly unsigned: number; readonly unchained: number }, anchored: boolean, note: string | undefined): { note?: string } => {
  const parts = [note, d.unsigned > 0 ? `${d.unsigned} delivery message(s) unsigned${anchored ? "" : " (pass --trust with kernel_keys to require signatures)"}` : undefined, d.unchained > 0 ? `${d.unchained} signed delivery message(s) name no commit digest` : undefined].filter((s) => s !== undefined)
  return parts.length === 0 ? {} : { note: parts.join("; ") }
}

/** What the commit-chain check could not prove, said plainly (nothing when everything was chained and anchored). */
const chainNote = (gaps: { readonly unchained: number; readonly unsigned: number; readonly unanchored: number }, anchored: boolean): string | undefined => {
  const parts: Array<string> = []
  if (gaps.unchained > 0) parts.push(`${gaps.unchained} call(s) unchained (no prev): removal or reordering in them cannot be proven`)
  if (gaps.unsigned > 0) parts.push(`${gaps.unsigned} commit(s) unsigned`)
  if (gaps.unanchored > 0) parts.push(`${gaps.unanchored} signed commit(s) unanchored`)
  if (!anchored) parts.push("no kernel_keys in a trust root: signatures are not required nor anchored (pass --trust)")
  return parts.length === 0 ? undefined : parts.join("; ")
}

/** The time of the last event of a call that decodes (null: none does). */
const lastAtOf = (log: CallLog): number | null => {
  for (let i = log.messages.length - 1; i >= 0; i--) {
    try {
      return Date.parse(parseCommit(log.messages[i]!.data).events.at(-1)!.at)
    } catch {
      continue
    }
  }
  return null
}

/** Whether a call recorded a plugin decision the rerun can check (only those keep their steps). */
const hasPluginDecision = (call: { readonly steps: ReadonlyArray<{ readonly event: HeldEvent }> }): boolean =>
  call.steps.some((s) => "decisions" in s.event && s.event.decisions.some((d) => d.digest !== undefined))

/** Whether the selection reads the whole stream (every record and checkpoint comes with it). */
const wholeStreamSelected = (selection: Selection): boolean => "fromSeq" in selection && selection.fromSeq <= 1

/** A check's result with more violations (failed when there are any). */
const withViolations = (r: CheckResult, more: ReadonlyArray<Violation>): CheckResult =>
  more.length === 0 ? r : { ...r, status: "failed", violations: [...r.violations, ...more] }

/** Every message of the history read: the calls' commits (stream and archives) and the policy and archive records. */
function* historyOf(logs: ReadonlyArray<CallLog>, records: ReadonlyArray<HistoryMessage>): Iterable<HistoryMessage> {
  for (const log of logs) for (const m of log.messages) yield { name: log.heldId, seq: m.seq, data: m.data }
  yield* records
}

/** Sequences in [from, to) that no archive record names (at most 100). */
const unarchivedIn = (seqs: ReadonlySet<number>, from: number, to: number): Array<number> => {
  const out: Array<number> = []
  for (let q = from; q < to && out.length < 100; q++) if (!seqs.has(q)) out.push(q)
  return out
}


/** Compares every re-folded call with its KV projection (64 reads in flight). */
const compareAll = (bucket: string, traced: ReadonlyArray<{ readonly heldId: string; readonly facts: HeldCallFacts }>) =>
  Effect.gen(function* () {
    const { kv } = yield* Nats
    const opened = yield* Effect.either(Effect.tryPromise({ try: () => kv(bucket), catch: auditError(`open KV bucket ${bucket}`) }))
    if (Either.isLeft(opened)) return { _tag: "unreadable" as const, note: opened.left.message }
    const bucketKv = opened.right
    const summary = { matched: 0, mismatched: 0, lagging: 0, ahead: 0, missing: 0 }
    const violations: Array<Violation> = []
    yield* Effect.forEach(
      traced,
      (call) =>
        Effect.tryPromise({ try: () => bucketKv.get(call.heldId), catch: auditError(`read projection of ${call.heldId}`) }).pipe(
          Effect.map((e) => {
            let projected: HeldCallFacts | null = null
            if (e !== null && e.operation === "PUT" && e.length > 0) {
              const d = decodeFacts(e.json())
              if (Either.isLeft(d)) {
                summary.mismatched++
                violations.push({ check: "projection", held_id: call.heldId, seqs: [], message: `the projection does not decode: ${d.left.message.slice(0, 200)}` })
                return
              }
              projected = d.right
            }
            const c = compareProjection(call.facts, projected)
            summary[c.kind]++
            if (c.kind === "mismatched") {
              violations.push({ check: "projection", held_id: call.heldId, seqs: [call.facts.last_seq], message: `the projection at seq ${call.facts.last_seq} differs from the re-fold in ${c.fields.join(", ")}` })
            }
          })
        ),
      { concurrency: 64, discard: true }
    )
    return { _tag: "compared" as const, summary: summary as ProjectionSummary, violations }
  })

/**
 * `plugin-pins`: every wasm a trusted epoch pins is in the plugin object store under its digest
 * and hashes to it (a swapped plugin is caught without re-running anything); one read per pin.
 */
const checkPins = (policy: PolicyHistory, bucket: string): Effect.Effect<CheckResult, AuditError, Nats> =>
  Effect.gen(function* () {
    const pins = new Map<string, string>()
    for (const e of policy.epochs) for (const p of e.policy.profiles) for (const pin of p.plugins ?? []) if (!pins.has(pin.sha256)) pins.set(pin.sha256, `${pin.name} (epoch ${e.epoch})`)
    if (pins.size === 0) return { name: "plugin-pins", status: "passed", checked: 0, violations: [], unverified: [], note: "no plugin pinned" }
    const loader = yield* Effect.either(makePinnedWasmLoader(bucket))
    if (Either.isLeft(loader)) return skipped("plugin-pins", `cannot read the plugin object store: ${loader.left.message}`)
    const violations: Array<Violation> = []
    const unverified: Array<{ held_id: string; seqs: Array<number>; message: string }> = []
    for (const [sha256, what] of pins) {
      const w = yield* loader.right(sha256)
      if (w.kind === "swapped") violations.push({ check: "plugin-pins", held_id: "", seqs: [], message: `${what}: the object store's wasm/${sha256} holds other bytes (sha256 ${w.actual})` })
      else if (w.kind === "absent") unverified.push({ held_id: "", seqs: [], message: `${what}: no wasm/${sha256} in the plugin object store` })
    }
    return { name: "plugin-pins", status: violations.length > 0 ? "failed" : unverified.length > 0 ? "pending" : "passed", checked: pins.size, violations, unverified, note: "stored wasm hashed against the pins; decisions are re-run with --rerun-plugins" }
  })
