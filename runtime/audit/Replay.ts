import { Effect, Either, Layer, Schema } from "effect"
import { layerNats, Nats, type NatsOptions } from "../ledger/Nats.js"
import { decodeEventBytes } from "../ledger/EventLog.js"
import { parseEvent } from "./internal/fastDecode.js"
import { makeSignatureVerifier } from "./internal/SignatureVerifier.js"
import type { SequencedEvent } from "../schema/Events.js"
import { HeldCallFacts } from "../schema/Facts.js"
import { PolicyApplied } from "../schema/PolicyApplied.js"
import { Buckets, Streams } from "../schema/Subjects.js"
import { auditError, type AuditError } from "./AuditError.js"
import { auditHistories, skipped, tally } from "./Audit.js"
import type { AuditReport, CheckResult, ProjectionSummary, Violation } from "./AuditReport.js"
import type { HeldHistory } from "./HeldHistory.js"
import { makePinnedWasmLoader } from "./PluginObjects.js"
import { DefaultRegistrySkewMs, policyHistory } from "./PolicyHistory.js"
import { readOrdered, readSubject, streamLayout, type RawMessage, type ReadProgress } from "./StreamReader.js"
import { compareProjection, rerunPlugins, type CheckContext } from "./checks/index.js"
import { readDeliveries } from "./Deliveries.js"
import { PluginBucket } from "../plugins/PluginStore.js"

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
  /** Re-run recorded plugin decisions from the pinned wasm (`plugin-rerun`). */
  readonly rerunPlugins?: boolean
  /** The plugin object store (default `wk_plugins`). */
  readonly pluginBucket?: string
  /** Tolerance around policy changes (see PolicyHistory). */
  readonly registrySkewMs?: number
  /** How long outstanding kernel work may take before it counts as missed (default 30 s). */
  readonly settleMs?: number
  /** Worker threads verifying signatures during the read (default: one per spare core, at most 2; 0: main thread). */
  readonly verifyWorkers?: number
  /** Called about once a second during long reads. */
  readonly onProgress?: (p: ReadProgress & { readonly phase: string }) => void
}

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
    const layout = yield* streamLayout(stream)
    const streamViolations: Array<Violation> = []
    const fail = (held_id: string, seqs: ReadonlyArray<number>, message: string) => void streamViolations.push({ check: "stream", held_id, seqs: [...seqs], message })
    if (layout.deleted > 0) fail("", [], `${layout.deleted} message(s) were deleted from ${stream}`)

    const policyMsgs = yield* readSubject(stream, `${layout.prefix}_policy`)
    const records: Array<PolicyApplied & { seq: number }> = []
    for (const m of policyMsgs) {
      const r = decodePolicy(text.decode(m.data))
      if (Either.isRight(r)) records.push({ ...r.right, seq: m.seq })
      else fail("_policy", [m.seq], `a policy record does not decode: ${r.left.message.slice(0, 200)}`)
    }
    const policy = policyHistory(records, options.registrySkewMs ?? DefaultRegistrySkewMs)

    const calls = new Map<string, Array<SequencedEvent>>()
    // Signatures are verified on worker threads while the stream is read.
    const verifier = yield* Effect.acquireRelease(Effect.sync(() => makeSignatureVerifier(options.verifyWorkers)), (v) => Effect.promise(() => v.finish()))
    let events = 0
    let prevSeq = 0
    let firstSeq = 0
    let lastSeq = 0
    const take = (m: RawMessage, contiguous: boolean) => {
      events++
      if (firstSeq === 0) firstSeq = m.seq
      lastSeq = m.seq
      if (contiguous && prevSeq !== 0 && m.seq !== prevSeq + 1) fail("", range(prevSeq + 1, m.seq), `sequences ${prevSeq + 1}..${m.seq - 1} are missing from ${stream}`)
      prevSeq = m.seq
      const heldId = m.subject.startsWith(layout.prefix) ? m.subject.slice(layout.prefix.length) : m.subject
      if (heldId === "_policy") return
      let event: SequencedEvent["event"]
      try {
        event = parseEvent(m.data)
      } catch (e) {
        return fail(heldId, [m.seq], `an event does not decode: ${String(e).slice(0, 200)}`)
      }
      if ("envelope" in event && event.envelope !== undefined) verifier.submit(m.seq, m.data)
      if (event.held_id !== heldId) fail(heldId, [m.seq], `an event of ${event.held_id} is stored on the subject of ${heldId}`)
      let list = calls.get(heldId)
      if (list === undefined) calls.set(heldId, (list = []))
      list.push({ seq: m.seq, event })
    }

    const progress = options.onProgress
    if ("held" in selection) {
      for (const m of yield* readSubject(stream, `${layout.prefix}${selection.held}`)) take(m, false)
    } else {
      const start = "fromSeq" in selection ? { fromSeq: Math.max(selection.fromSeq, layout.firstSeq) } : { since: selection.since }
      yield* readOrdered(stream, start, layout.lastSeq, (m) => take(m, true), progress && ((p) => progress({ ...p, phase: "events" })))
      if ("fromSeq" in selection && selection.fromSeq < layout.firstSeq) fail("", [], `the selection starts at ${selection.fromSeq}, but ${stream} begins at ${layout.firstSeq} (earlier messages were purged)`)
    }

    // Calls the range touched are folded from their first event.
    let backfilled = 0
    if (firstSeq > layout.firstSeq && !("held" in selection)) {
      yield* Effect.forEach(
        [...calls.keys()],
        (heldId) =>
          Effect.map(readSubject(stream, `${layout.prefix}${heldId}`, 1, firstSeq), (earlier) => {
            if (earlier.length === 0) return
            const before: Array<SequencedEvent> = []
            for (const m of earlier) {
              try {
                before.push({ seq: m.seq, event: decodeEventBytes(m.data) })
              } catch (e) {
                fail(heldId, [m.seq], `an event does not decode: ${String(e).slice(0, 200)}`)
              }
            }
            backfilled += earlier.length
            calls.set(heldId, [...before, ...calls.get(heldId)!])
          }),
        { concurrency: 16, discard: true }
      )
    }

    const sessions = options.sessionsStream === undefined ? Streams.sessions : options.sessionsStream
    const deliveries = sessions === null ? { _tag: "skipped" as const, note: "sessions stream not read (disabled)" } : yield* readDeliveries(sessions, calls)

    const verdicts = yield* Effect.promise(() => verifier.finish())

    let newestAt = 0
    for (const list of calls.values()) newestAt = Math.max(newestAt, Date.parse(list[list.length - 1]!.event.at))
    const ctx: CheckContext = {
      policy,
      newestAt,
      settleMs: options.settleMs ?? 30_000,
      verified: (seq) => verdicts.get(seq),
      ...(deliveries._tag === "read" ? { deliveries: deliveries.byHeld } : {})
    }
    const histories: Array<HeldHistory> = [...calls].map(([heldId, evs]) => ({ heldId, events: evs }))
    const { traced, checks } = auditHistories(histories, ctx, { keepSteps: options.rerunPlugins === true })
    const held = checks.map((c) => (c.name === "delivery" && deliveries._tag === "skipped" ? { ...c, note: deliveries.note } : c))

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

    let pluginCheck: CheckResult = skipped("plugin-rerun", "pass --rerun-plugins to re-run recorded plugin decisions")
    if (options.rerunPlugins === true) {
      const bucket = options.pluginBucket ?? PluginBucket
      const anyDecision = traced.some((c) => c.steps.some((s) => "decisions" in s.event && s.event.decisions.some((d) => d.digest !== undefined)))
      const loader = anyDecision ? yield* Effect.either(makePinnedWasmLoader(bucket)) : undefined
      if (!anyDecision) pluginCheck = { ...skipped("plugin-rerun", "no recorded plugin decision in the selection"), status: "passed" }
      else if (loader !== undefined && Either.isLeft(loader)) pluginCheck = skipped("plugin-rerun", `cannot read the plugin object store: ${loader.left.message}`)
      else if (loader !== undefined && Either.isRight(loader)) {
        const t = tally()
        t.add("plugin-rerun", yield* rerunPlugins(traced, ctx, loader.right))
        pluginCheck = t.result("plugin-rerun")
      }
    }

    const all: Array<CheckResult> = [
      { name: "stream", status: streamViolations.length > 0 ? "failed" : "passed", checked: events + backfilled, violations: streamViolations, unverified: [] },
      ...held,
      projectionCheck,
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
      held_calls: calls.size,
      policy_epochs: policy.epochs.map((e) => e.epoch),
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

const range = (from: number, to: number): Array<number> => Array.from({ length: Math.min(to - from, 100) }, (_, i) => from + i)

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
