import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client"
import { KernelVersion } from "./KernelVersion.js"

/**
 * The kernel process's Prometheus metrics, in one registry of its own. Hot paths touch only
 * counters and histograms (an increment, an observation); gauges that need a read (consumer lag,
 * the policy epoch, open calls by state) are computed when scraped, through `onScrape`. Process
 * metrics carry the standard `process_` and `nodejs_` names, so stock Node.js dashboards read them.
 */
export const makeKernelMetrics = () => {
  const registry = new Registry()
  const requestSeconds = new Histogram({
    name: "wk_request_seconds",
    help: "Time to answer a protocol request, by operation (propose, attest, get, cancel, ack, settle, ...); a blocking proposal waits for its call's end",
    labelNames: ["op"] as const,
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 30, 60, 120, 300, 600],
    registers: [registry]
  })
  const eventsCommitted = new Counter({ name: "wk_events_committed_total", help: "Events committed to WK_EVENTS, by type", labelNames: ["type"] as const, registers: [registry] })
  const verdicts = new Counter({ name: "wk_calls_adjudicated_total", help: "Verdicts recorded, by verdict", labelNames: ["verdict"] as const, registers: [registry] })
  const outcomes = new Counter({ name: "wk_calls_ended_total", help: "Calls that ended, by outcome", labelNames: ["outcome"] as const, registers: [registry] })
  const appendConflicts = new Counter({ name: "wk_append_conflicts_total", help: "Commits refused because another writer appended first (retried)", registers: [registry] })
  const pluginSeconds = new Histogram({
    name: "wk_plugin_call_seconds",
    help: "Time of one plugin call, by plugin (its name), plugin_version, stage and status",
    labelNames: ["plugin", "plugin_version", "stage", "status"] as const,
    buckets: [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1],
    registers: [registry]
  })
  const pluginFuel = new Histogram({
    name: "wk_plugin_fuel_units",
    help: "Fuel one metered plugin call spent (about one unit per nanosecond of straight-line code; a call's budget is 1,000,000 per ms of timeout_ms), by plugin, plugin_version and stage",
    labelNames: ["plugin", "plugin_version", "stage"] as const,
    buckets: [1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000, 10_000_000_000],
    registers: [registry]
  })
  const releaseSeconds = new Histogram({
    name: "wk_release_seconds",
    help: "From the approval that made a held call ready to its result's delivery, as seen by the process that committed both",
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
    registers: [registry]
  })
  const openCalls = new Gauge({
    name: "wk_held_calls_open",
    help: "Open held calls by state (open/<readiness>[/<execution>], as wk status shows them), read from the open-call index when scraped",
    labelNames: ["state"] as const,
    registers: [registry]
  })
  const buildInfo = new Gauge({ name: "wk_build_info", help: "1, labelled with the kernel's version and the Node.js version it runs on", labelNames: ["version", "nodejs_version"] as const, registers: [registry] })
  buildInfo.set({ version: KernelVersion, nodejs_version: process.version }, 1)
  const wakes = new Counter({ name: "wk_wakes_total", help: "Wakes the controller handled, by whether they were redelivered", labelNames: ["redelivered"] as const, registers: [registry] })
  const reconciles = new Counter({ name: "wk_reconcile_outcomes_total", help: "Controller reconcile outcomes", labelNames: ["outcome"] as const, registers: [registry] })
  const recoveryScans = new Counter({ name: "wk_recovery_scans_total", help: "Recovery sweeps of the open-call index", registers: [registry] })
  const toolRepliesRefused = new Counter({ name: "wk_tool_replies_refused_total", help: "Tool replies refused because the tool's registered service did not sign them, by tool", labelNames: ["tool"] as const, registers: [registry] })
  const defects = new Counter({ name: "wk_defects_total", help: "Unexpected failures logged by a loop, by loop", labelNames: ["loop"] as const, registers: [registry] })
  const policyEpoch = new Gauge({ name: "wk_policy_epoch", help: "The policy epoch this process holds", registers: [registry] })
  const consumerLag = new Gauge({ name: "wk_controller_consumer_pending", help: "Wakes waiting in the controller's consumer", registers: [registry] })
  collectDefaultMetrics({ register: registry })
  const scrapers: Array<() => Promise<void>> = []
  /** When this process's recovery sweep last finished a pass (ms), for `wk status`. */
  const marks: { lastRecoveryAt: number | undefined } = { lastRecoveryAt: undefined }
  return {
    marks,
    registry,
    requestSeconds,
    eventsCommitted,
    verdicts,
    outcomes,
    appendConflicts,
    pluginSeconds,
    pluginFuel,
    releaseSeconds,
    openCalls,
    wakes,
    reconciles,
    recoveryScans,
    defects,
    toolRepliesRefused,
    policyEpoch,
    consumerLag,
    /** Registers work to run before each scrape (reads that set gauges). */
    onScrape: (f: () => Promise<void>) => void scrapers.push(f),
    /** The Prometheus text of every metric, gauges refreshed first (a failed read leaves its gauge as it was). */
    scrape: async (): Promise<string> => {
      await Promise.all(scrapers.map((f) => f().catch(() => undefined)))
      return registry.metrics()
    }
  }
}

export type KernelMetrics = ReturnType<typeof makeKernelMetrics>

/** The process's metrics: one registry per process, shared by every kernel layer in it. */
export const kernelMetrics: KernelMetrics = makeKernelMetrics()
