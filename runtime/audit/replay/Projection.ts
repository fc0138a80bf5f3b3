import { Effect, Either, Schema } from "effect"
import { LedgerReader } from "../../ledger/LedgerReader.js"
import { HeldCallFacts } from "../../schema/Facts.js"
import { auditError, type AuditError } from "../AuditError.js"
import type { CheckResult, ProjectionSummary, Violation } from "../AuditReport.js"
import { skipped } from "../Audit.js"
import { compareProjection } from "../checks/index.js"

const decodeFacts = Schema.decodeUnknownEither(HeldCallFacts)

/** The `projection` check and its summary (null: not compared). */
export interface ProjectionOutcome {
  readonly check: CheckResult
  readonly summary: ProjectionSummary | null
}

/** `projection`: every re-folded call against its KV projection (64 reads in flight); null bucket: not compared. */
export const projectionCheck = (bucket: string | null, traced: ReadonlyArray<{ readonly heldId: string; readonly facts: HeldCallFacts }>): Effect.Effect<ProjectionOutcome, AuditError, LedgerReader> =>
  Effect.gen(function* () {
    if (bucket === null) return { check: skipped("projection", "projection comparison disabled"), summary: null }
    const r = yield* compareAll(bucket, traced)
    if (r._tag === "unreadable") return { check: skipped("projection", r.note), summary: null }
    return {
      summary: r.summary,
      check: {
        name: "projection",
        status: r.violations.length > 0 ? "failed" : "passed",
        checked: traced.length,
        violations: r.violations,
        unverified: [],
        note: `matched ${r.summary.matched}, lagging ${r.summary.lagging}, ahead ${r.summary.ahead}, missing ${r.summary.missing}`
      }
    }
  })

const compareAll = (bucket: string, traced: ReadonlyArray<{ readonly heldId: string; readonly facts: HeldCallFacts }>) =>
  Effect.gen(function* () {
    const { kv } = yield* LedgerReader
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
