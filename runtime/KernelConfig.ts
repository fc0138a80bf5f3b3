import { Context, Layer } from "effect"
import { hostname } from "node:os"
import { randomBytes } from "node:crypto"
import { retentionOf, type RetentionConfig } from "./ledger/Retention.js"
import { reevaluationPaceOf, type ReevaluationPace } from "./policy/ReevaluationPace.js"
import { DefaultDeliveryRetry, type DeliveryRetry } from "./heldcall/Reconciler.js"

/** Tunables of one kernel process. */
export class KernelConfig extends Context.Tag("wk/KernelConfig")<
  KernelConfig,
  {
    /** This process's name in leases and events. */
    readonly owner: string
    /** Effect lease time-to-live; must exceed the tool timeout. */
    readonly leaseMs: number
    /** How long a tool may take to answer before the outcome is unknown. */
    readonly toolTimeoutMs: number
    /** How long a proposer waits for another worker to finish the same call. */
    readonly answerWaitMs: number
    /** How often the kernel probes the sessions of calls proposed with cancel_on_disconnect. */
    readonly presenceIntervalMs: number
    /** Republishing of unacknowledged deliveries: backoff base and cap, and the grace after expiry. */
    readonly delivery: DeliveryRetry
    /** Stream limits and archiving of ended held calls. */
    readonly retention: RetentionConfig
    /** Pace and sharding of the re-evaluation of open held calls after a policy change. */
    readonly reevaluation: ReevaluationPace
    /** Pause the executor (tests make race windows deterministic with it). */
    readonly executorPaused: () => boolean
    /** How often the recovery sweep re-derives the work of open held calls; 0 turns it off. */
    readonly sweepIntervalMs: number
    /** Most held calls one kernel's sweep drives per second (the sweep is paced, not a burst). */
    readonly sweepRatePerSec: number
  }
>() {}

/**
 * How long a stopping kernel lets the requests it took, and then the drives it runs, finish: the
 * longest a call waits on its tool, and a second for what follows it.
 */
export const stopGraceMs = (config: { readonly toolTimeoutMs: number }): number => config.toolTimeoutMs + 1_000

export const defaultOwner = () => `kernel-${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`

export const layerKernelConfig = (overrides: Partial<Context.Tag.Service<KernelConfig>> = {}) =>
  Layer.succeed(KernelConfig, {
    owner: overrides.owner ?? defaultOwner(),
    leaseMs: overrides.leaseMs ?? Number(process.env["WK_LEASE_MS"] ?? 10_000),
    toolTimeoutMs: overrides.toolTimeoutMs ?? Number(process.env["WK_TOOL_TIMEOUT_MS"] ?? 5_000),
    answerWaitMs: overrides.answerWaitMs ?? 10_000,
    presenceIntervalMs: overrides.presenceIntervalMs ?? Number(process.env["WK_PRESENCE_MS"] ?? 2_000),
    delivery: overrides.delivery ?? {
      baseMs: Number(process.env["WK_DELIVERY_RETRY_MS"] ?? DefaultDeliveryRetry.baseMs),
      maxMs: Number(process.env["WK_DELIVERY_RETRY_MAX_MS"] ?? DefaultDeliveryRetry.maxMs),
      graceMs: Number(process.env["WK_DELIVERY_GRACE_MS"] ?? DefaultDeliveryRetry.graceMs)
    },
    retention: overrides.retention ?? retentionOf(),
    reevaluation: overrides.reevaluation ?? reevaluationPaceOf(),
    executorPaused: overrides.executorPaused ?? (() => process.env["WK_EXECUTOR_PAUSED"] === "1"),
    sweepIntervalMs: overrides.sweepIntervalMs ?? Number(process.env["WK_SWEEP_MS"] ?? 30_000),
    sweepRatePerSec: overrides.sweepRatePerSec ?? Number(process.env["WK_SWEEP_RATE"] ?? 200)
  })
