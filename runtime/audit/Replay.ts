import { Effect, Layer } from "effect"
import type { JSONWebKeySet } from "jose"
import { standingSubjectOf } from "../schema/StandingGrant.js"
import type { LedgerReader } from "../ledger/LedgerReader.js"
import { layerLedgerReaderAt, type NatsOptions } from "../ledger/NatsLedgerReader.js"
import { auditError, type AuditError } from "./AuditError.js"
import type { AuditReport } from "./AuditReport.js"
import { skipped, tally as findingTally } from "./Audit.js"
import { checkpointsCheck, type HistoryMessage } from "./checks/Checkpoints.js"
import { bearerTokenCheck, behalfProposalsOf, standingCheck, type BehalfProposal, type CheckContext, type GrantMessage } from "./checks/index.js"
import { makeSignatureVerifier, type SignatureVerifier } from "./internal/SignatureVerifier.js"
import { readSubject } from "./StreamReader.js"
import { checkCall, lastAtOf, type CallEnvironment, type CallOutcome } from "./replay/CheckCall.js"
import { collect, type CallLog, type Collected } from "./replay/Collect.js"
import { planReplay, type ReplayOptions, type ReplayPlan } from "./replay/Plan.js"
import { pinCheck, pluginRerunCheck } from "./replay/PluginChecks.js"
import { projectionCheck } from "./replay/Projection.js"
import { reportOf, type StreamWideChecks } from "./replay/Report.js"
import { replayTally, type Tallied } from "./replay/Tally.js"
import { verifyTrust, type Trusted } from "./replay/Verify.js"

export { DefaultStoreSkewMs, type ReplayOptions, type Selection } from "./replay/Plan.js"

const StandingPrefix = standingSubjectOf("")

/**
 * `wk audit replay` as a library, in named stages: plan (options, the stream's bounds), collect
 * (the calls' commits as bytes, records, checkpoints, deliveries; envelopes verified on worker
 * threads meanwhile), verify (the registry and kernel keys from the trust root), check each call
 * (decode, chains, re-fold, every pure check), tally, then the whole-stream checks (checkpoints,
 * standing approvals, projection, plugin pins and re-runs, bearer tokens) and the report. Never writes anything;
 * works with the read-only auditor credentials.
 */
export const replay = (options: ReplayOptions = {}): Effect.Effect<AuditReport, AuditError, LedgerReader> =>
  Effect.scoped(Effect.gen(function* () {
    const t0 = Date.now()
    const plan = yield* planReplay(options)
    const verifier = yield* Effect.acquireRelease(Effect.sync(() => makeSignatureVerifier(options.verifyWorkers)), (v) => Effect.promise(() => v.finish()))
    const collected = yield* collect(plan, verifier)
    const trusted = yield* verifyTrust(plan, collected)
    const logs = [...collected.calls.values()]
    const ctx = checkContext(plan, collected, trusted, verifier, logs)
    const tally = replayTally(trusted, { keepPluginSteps: plan.rerun })
    const behalf: Array<BehalfProposal> = []
    yield* checkCalls(logs, { ctx, kernelKeys: trusted.kernelKeys, storeSkewMs: plan.storeSkewMs }, verifier, (o, i) => {
      ctx.lastAt[i] = o.lastAt
      tally.add(o)
      if (o.audited !== undefined) behalf.push(...behalfProposalsOf(o.audited.call))
    })
    const tallied = tally.done(ctx, trusted.kernelKeys !== undefined)
    const wide = yield* streamWideChecks(plan, collected, trusted, tallied, ctx, behalf)
    return reportOf(plan, collected, trusted, tallied, wide, Date.now() - t0)
  }))

/** `replay` over its own connection (the CLI's entry point). */
export const replayOver = (nats: NatsOptions, options: ReplayOptions = {}): Effect.Effect<AuditReport, AuditError> =>
  replay(options).pipe(Effect.provide(Layer.mapError(layerLedgerReaderAt({ name: "wk-auditor", ...nats }), auditError("connect"))))

/** The checks' context, with the time of each call's last event filled in as calls are checked. */
const checkContext = (plan: ReplayPlan, collected: Collected, trusted: Trusted, verifier: SignatureVerifier, logs: ReadonlyArray<CallLog>): CheckContext & { readonly lastAt: Array<number | null | undefined> } => {
  const lastAt: Array<number | null | undefined> = new Array(logs.length)
  let newestAt: number | undefined
  const d = collected.deliveries
  return {
    lastAt,
    policy: trusted.policy,
    // Only the delivery check of an ended, undelivered call asks: most replays never compute it.
    get newestAt() {
      if (newestAt === undefined) {
        newestAt = 0
        for (let i = 0; i < logs.length; i++) {
          const t = lastAt[i] ?? lastAtOf(logs[i]!.messages)
          if (t !== null) newestAt = Math.max(newestAt, t)
        }
      }
      return newestAt
    },
    settleMs: plan.settleMs,
    eventsReadAt: plan.eventsReadAt,
    // A worker answers per commit: true when every envelope in it verifies; otherwise the
    // check verifies each envelope of that commit itself.
    verified: (seq) => (verifier.verdict(seq) === true ? true : undefined),
    storedAt: (seq) => collected.storeTimes.get(seq) ?? 0,
    ...(d._tag === "read" ? { deliveries: d.byHeld, deliveriesFrom: d.from } : {})
  }
}

/**
 * Stage 4 over every call: a call is checked once the verdicts on its envelopes are in, while
 * the workers verify the rest; outcomes are handed on in stream order.
 */
const checkCalls = (
  logs: ReadonlyArray<CallLog>,
  env: CallEnvironment,
  verifier: SignatureVerifier,
  onOutcome: (o: CallOutcome, index: number) => void
): Effect.Effect<void> =>
  Effect.gen(function* () {
    const outcomes: Array<CallOutcome | undefined> = new Array(logs.length)
    let handed = 0
    let waiting = logs.map((_, i) => i)
    while (waiting.length > 0) {
      const later: Array<number> = []
      for (const i of waiting) {
        const log = logs[i]!
        if (!log.signed.every(verifier.answered)) {
          later.push(i)
          continue
        }
        outcomes[i] = checkCall(log.heldId, log.messages, env)
        while (handed < outcomes.length && outcomes[handed] !== undefined) {
          onOutcome(outcomes[handed]!, handed)
          outcomes[handed++] = undefined
        }
      }
      if (later.length > 0) yield* Effect.promise(() => verifier.next())
      waiting = later
    }
  })

/** The checks over the whole replay: checkpoints, standing approvals, projection, plugin pins and re-runs. */
const streamWideChecks = (plan: ReplayPlan, collected: Collected, trusted: Trusted, tallied: Tallied, ctx: CheckContext, behalf: ReadonlyArray<BehalfProposal>): Effect.Effect<StreamWideChecks, AuditError, LedgerReader> =>
  Effect.gen(function* () {
    // Standing approvals: every grant in a whole-stream read, else those the selected calls used.
    const grants = new Map<string, Array<GrantMessage>>()
    if (plan.wholeStream) {
      for (const m of collected.records) if (m.name.startsWith(StandingPrefix)) grants.set(m.name.slice(StandingPrefix.length), [...(grants.get(m.name.slice(StandingPrefix.length)) ?? []), m])
    } else {
      for (const id of new Set(tallied.applied.map((a) => a.event.grant_id))) grants.set(id, [...(yield* readSubject(plan.stream, `${plan.layout.prefix}${standingSubjectOf(id)}`))])
    }
    const standing = standingCheck(grants, tallied.applied, trusted.policy, plan.wholeStream)
    const projection = yield* projectionCheck(plan.factsBucket, tallied.traced)
    const pins = yield* pinCheck(trusted.policy, plan.pluginBucket)
    const rerun = yield* pluginRerunCheck(plan.rerun, plan.pluginBucket, tallied.traced, ctx)
    const checkpoints = plan.wholeStream
      ? checkpointsCheck(collected.checkpoints, historyOf(collected.calls.values(), collected.records), plan.layout.lastSeq, trusted.kernelKeys, plan.mustHold)
      : skipped("checkpoints", "checkpoints are checked by a replay of the whole stream")
    const tokens = yield* Effect.promise(() => bearerTokenCheck(behalf, ctx, plan.options.trust?.issuers as Readonly<Record<string, JSONWebKeySet>> | undefined, plan.options.trust !== undefined))
    const t = findingTally()
    for (const f of tokens) t.add("bearer-tokens", f)
    const bearer = t.result("bearer-tokens", `${behalf.length} proposal(s) on behalf of a bearer token${plan.options.trust?.issuers === undefined ? " (no issuers in a trust root: pass --trust with issuers to verify them)" : ""}`)
    return { checkpoints, standing, projection: projection.check, projectionSummary: projection.summary, pins, rerun, bearer }
  })

/** Every message of the history read: the calls' commits (stream and archives) and the policy and archive records. */
function* historyOf(logs: Iterable<CallLog>, records: ReadonlyArray<HistoryMessage>): Iterable<HistoryMessage> {
  for (const log of logs) for (const m of log.messages) yield { name: log.heldId, seq: m.seq, data: m.data }
  yield* records
}
