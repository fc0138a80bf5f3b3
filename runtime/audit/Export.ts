import { CheckpointSubject, decodeCheckpoint } from "../schema/Checkpoint.js"
import { Effect, Either, Layer, Schema } from "effect"
import type { LedgerReader } from "../ledger/LedgerReader.js"
import { layerLedgerReaderAt, type NatsOptions } from "../ledger/NatsLedgerReader.js"
import { decodeCommitBytes } from "../schema/Commit.js"
import { jcsDigest } from "../schema/Canonical.js"
import type { SequencedEvent } from "../schema/Events.js"
import type { JsonValue } from "../schema/Json.js"
import { PolicyApplied } from "../schema/PolicyApplied.js"
import { Streams } from "../schema/Subjects.js"
import { AuditError, auditError } from "./AuditError.js"
import { readDeliveries } from "./Deliveries.js"
import { ExportFormat, type ExportDocument, type RegistryEpoch } from "./ExportDocument.js"
import { readSubject, streamLayout } from "./StreamReader.js"
import { readArchives } from "./Archives.js"
import { activePolicy } from "../policy/ActivePolicy.js"

export interface ExportOptions {
  readonly held: string
  readonly stream?: string
  /** The deliveries stream (default `WK_SESSIONS`); null leaves deliveries out. */
  readonly sessionsStream?: string | null
}

const decodePolicy = Schema.decodeUnknownEither(Schema.parseJson(PolicyApplied))

/**
 * `wk audit export` as a library: one held call's events exactly as stored, each addressed by
 * its commit's stream sequence and its index in the commit, the registry of
 * every recorded policy epoch (public keys and classes only), the public keys of its signers,
 * and its deliveries: everything `verifyExport` needs, nothing secret. This is the auditor's
 * view (runtime/heldcall/Views.ts): the only one that holds quarantined bytes (the tool's raw
 * result or error in `effect.recorded`), so it is served to the auditor role alone.
 */
export const exportHeld = (options: ExportOptions): Effect.Effect<ExportDocument, AuditError, LedgerReader> =>
  Effect.gen(function* () {
    const stream = options.stream ?? Streams.events
    const layout = yield* streamLayout(stream)
    const hot = yield* readSubject(stream, `${layout.prefix}${options.held}`)
    // An archived call's events come from its archive (only if the archive verifies); an event
    // appended after archiving (a late acknowledgment) is still in the stream.
    const archives = yield* readArchives(stream, layout.prefix, options.held)
    const broken = archives.violations.find((v) => v.held_id === options.held)
    if (broken !== undefined) return yield* new AuditError({ operation: "export", message: broken.message })
    const archived = (archives.byHeld.get(options.held) ?? []).filter((a) => !hot.some((m) => m.seq === a.seq))
    const raw = [...archived, ...hot].sort((a, b) => a.seq - b.seq)
    if (raw.length === 0) return yield* new AuditError({ operation: "export", message: `no events for ${options.held} in ${stream} or its archives` })
    // Events exactly as stored (commits decoded only to validate them), each at its address
    // (seq, index): nothing the kernel wrote is dropped.
    const events: Array<SequencedEvent> = []
    const commits: Array<{ seq: number; stored: string }> = []
    for (const m of raw) {
      commits.push({ seq: m.seq, stored: new TextDecoder().decode(m.data) })
      yield* Effect.try({ try: () => decodeCommitBytes(m.data), catch: auditError(`decode the commit at seq ${m.seq}`) })
      const stored = (JSON.parse(new TextDecoder().decode(m.data)) as { readonly events: ReadonlyArray<SequencedEvent["event"]> }).events
      stored.forEach((event, index) => events.push({ seq: m.seq, index, event }))
    }
    const registry: Array<RegistryEpoch> = []
    for (const m of yield* readSubject(stream, `${layout.prefix}_policy`)) {
      const r = decodePolicy(new TextDecoder().decode(m.data))
      if (Either.isLeft(r) || registry.some((x) => x.epoch === r.right.epoch)) continue
      registry.push({ epoch: r.right.epoch, at: r.right.at, principals: Object.fromEntries(activePolicy(r.right.epoch, r.right.profiles).principals) })
    }
    const keys: Record<string, Array<string>> = {}
    for (const { event } of events) {
      if (!("envelope" in event) || event.envelope === undefined) continue
      const principal = String(event.envelope.payload["principal"])
      const list = (keys[principal] ??= [])
      if (!list.includes(event.envelope.key)) list.push(event.envelope.key)
    }
    // The checkpoints that name this call: the heads an offline verifier holds the commits to.
    const checkpoints: Array<{ seq: number; stored: string }> = []
    for (const m of yield* readSubject(stream, `${layout.prefix}${CheckpointSubject}`)) {
      const c = decodeCheckpoint(m.data)
      if (Either.isRight(c) && c.right.heads.some((h) => h[0] === options.held)) checkpoints.push({ seq: m.seq, stored: new TextDecoder().decode(m.data) })
    }
    const sessions = options.sessionsStream === undefined ? Streams.sessions : options.sessionsStream
    const deliveries = sessions === null ? undefined : yield* readDeliveries(sessions, new Map([[options.held, true]]))
    const delivered = deliveries?._tag === "read" ? (deliveries.byHeld.get(options.held) ?? []).map(({ chain: _, ...d }) => ({ ...d, result: (d.result ?? null) as JsonValue })) : undefined
    const doc: ExportDocument = {
      format: ExportFormat,
      held_id: options.held,
      stream,
      exported_at: new Date().toISOString(),
      events,
      registry,
      keys,
      ...(delivered !== undefined ? { deliveries: delivered } : {}),
      commits,
      ...(checkpoints.length > 0 ? { checkpoints } : {}),
      events_digest: jcsDigest(events)
    }
    return doc
  })

/** `exportHeld` over its own connection (the CLI's entry point). */
export const exportOver = (nats: NatsOptions, options: ExportOptions): Effect.Effect<ExportDocument, AuditError> =>
  exportHeld(options).pipe(Effect.provide(Layer.mapError(layerLedgerReaderAt({ name: "wk-auditor", ...nats }), auditError("connect"))))
