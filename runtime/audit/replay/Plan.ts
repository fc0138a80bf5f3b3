import { Effect } from "effect"
import type { LedgerReader } from "../../ledger/LedgerReader.js"
import { PluginBucket } from "../../schema/Subjects.js"
import { Buckets, Streams } from "../../schema/Subjects.js"
import type { AuditError } from "../AuditError.js"
import { DefaultRegistrySkewMs } from "../PolicyHistory.js"
import { streamLayout, type ReadProgress, type StreamLayout } from "../StreamReader.js"
import type { TrustRoot } from "../TrustRoot.js"

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
  /** Worker threads re-running plugin decisions (default: as `verifyWorkers`; 0: main thread). */
  readonly rerunWorkers?: number
  /**
   * The trust root the auditor holds out of band. Without one the first policy record is
   * trusted as found and the report says the registry is not rooted.
   */
  readonly trust?: TrustRoot
  /** A checkpoint the auditor kept elsewhere (`wk audit checkpoint --out`): it must be in the stream's checkpoint chain. */
  readonly keptCheckpoint?: Uint8Array
  /** Checkpoints anchored outside the stream (`wk audit anchor pull`): each must be in the stream's checkpoint chain. */
  readonly anchored?: ReadonlyArray<Uint8Array>
  /** Called about once a second during long reads. */
  readonly onProgress?: (p: ReadProgress & { readonly phase: string }) => void
}

/** Default tolerance between a commit's store time and its events' time. */
export const DefaultStoreSkewMs = 5 * 60_000

/** How far the NATS server's clock may be behind the auditor's when their times are compared. */
const StoreClockMarginMs = 1000

/** What one replay reads and how it judges: the options resolved, and the stream's bounds as read once. */
export interface ReplayPlan {
  readonly options: ReplayOptions
  readonly stream: string
  readonly selection: Selection
  readonly layout: StreamLayout
  /** Whether the selection reads the whole stream (every record and checkpoint comes with it). */
  readonly wholeStream: boolean
  /** When the events' bounds were read, less a margin for the server's clock (see CheckContext). */
  readonly eventsReadAt: number
  readonly registrySkewMs: number
  readonly storeSkewMs: number
  readonly settleMs: number
  /** The sessions stream to read deliveries from (null: not read). */
  readonly sessions: string | null
  /** The projection bucket (null: not compared). */
  readonly factsBucket: string | null
  readonly pluginBucket: string
  readonly rerun: boolean
  /** Checkpoints the chain must hold: the anchored ones and the kept one. */
  readonly mustHold: ReadonlyArray<Uint8Array>
}

/** Whether a selection reads the whole stream. */
export const wholeStreamSelected = (selection: Selection): boolean => "fromSeq" in selection && selection.fromSeq <= 1

/** Stage 1: resolves the options and reads the stream's bounds (the only read of this stage). */
export const planReplay = (options: ReplayOptions): Effect.Effect<ReplayPlan, AuditError, LedgerReader> =>
  Effect.gen(function* () {
    const stream = options.stream ?? Streams.events
    const selection = options.selection ?? { fromSeq: 1 }
    // Taken before the stream's bounds are read: a delivery stored before it follows commits the
    // read holds; one stored later may not.
    const eventsReadAt = Date.now() - StoreClockMarginMs
    const layout = yield* streamLayout(stream)
    return planOf(options, layout, eventsReadAt)
  })

/** The plan for options over a stream of this layout (pure). */
export const planOf = (options: ReplayOptions, layout: StreamLayout, eventsReadAt: number): ReplayPlan => {
  const selection = options.selection ?? { fromSeq: 1 }
  return {
    options,
    stream: options.stream ?? layout.stream,
    selection,
    layout,
    wholeStream: wholeStreamSelected(selection),
    eventsReadAt,
    registrySkewMs: options.registrySkewMs ?? DefaultRegistrySkewMs,
    storeSkewMs: options.storeSkewMs ?? DefaultStoreSkewMs,
    settleMs: options.settleMs ?? 30_000,
    sessions: options.sessionsStream === undefined ? Streams.sessions : options.sessionsStream,
    factsBucket: options.factsBucket === null ? null : (options.factsBucket ?? Buckets.facts),
    pluginBucket: options.pluginBucket ?? PluginBucket,
    rerun: options.rerunPlugins !== false,
    mustHold: [...(options.anchored ?? []), ...(options.keptCheckpoint !== undefined ? [options.keptCheckpoint] : [])]
  }
}
