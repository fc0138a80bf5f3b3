import type { SpanExporter } from "@opentelemetry/sdk-trace-base"
import { startTracing, stopTracing } from "./observability/Tracing.js"
import { Effect, Layer } from "effect"
import { layerKernelConfig, KernelConfig, stopGraceMs } from "./KernelConfig.js"
import { layerNats, Nats, type NatsOptions } from "./ledger/Nats.js"
import { layerNatsLedger } from "./ledger/LedgerPorts.js"
import { HeldCallStore } from "./ledger/HeldCallStore.js"
import { provision } from "./ledger/Provision.js"
import { retentionOf } from "./ledger/Retention.js"
import { layerHeldIds } from "./protocol/HeldIds.js"
import { layerPolicyStore } from "./ledger/NatsPolicyStore.js"
import { layerRuleAdjudicator } from "./policy/RuleAdjudicator.js"
import { layerAdmitAll } from "./policy/Admission.js"
import { layerDriver } from "./loops/Driver.js"
import { layerHeldCalls } from "./loops/HeldCalls.js"
import { runController } from "./loops/Controller.js"
import { runPresenceWatch } from "./loops/PresenceWatch.js"
import { runArchiver } from "./loops/Archiver.js"
import { runPolicyReevaluation } from "./loops/PolicyReevaluation.js"
import { layerAllowLatency } from "./loops/AllowLatency.js"
import { runRecoverySweep } from "./loops/RecoverySweep.js"
import { runCheckpointer } from "./loops/Checkpointer.js"
import { serveProtocol } from "./protocol/Service.js"
import { servePolicyApplyTool } from "./protocol/PolicyApplyTool.js"
import { serveStatus } from "./protocol/Status.js"
import { serveHealth } from "./protocol/Health.js"
import type { Profile } from "./schema/Profile.js"
import type { Adjudicator } from "./policy/Adjudicator.js"
import type { Admission } from "./policy/Admission.js"
import { layerProfileSeams } from "./plugins/ProfileSeams.js"
import { layerPluginHost } from "./plugins/PluginHost.js"
import { layerHostEnvKv } from "./plugins/HostEnvKv.js"
import { findPluginDirs, readPluginDir } from "./plugins/PluginSource.js"
import { layerPluginSourceObjectStore, publishPlugin } from "./ledger/PluginStore.js"
import { Buckets } from "./schema/Subjects.js"
import { LedgerError } from "./schema/LedgerError.js"

export interface KernelOptions {
  readonly nats: NatsOptions
  readonly profiles: ReadonlyArray<Profile>
  readonly config?: Partial<Parameters<typeof layerKernelConfig>[0]>
  /** Policy seams; default: the profile's rule adjudicator and admit-all. */
  readonly adjudicator?: Layer.Layer<Adjudicator>
  readonly admission?: Layer.Layer<Admission>
  readonly replicas?: number
  /** Where spans go (tests: an in-memory exporter); default OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, else no tracing. */
  readonly traceExporter?: SpanExporter
}

/**
 * The policy seams over the plugin host: plugin bytes come from the JetStream object store (so
 * every kernel process runs the same bytes), host data from the `wk_hostdata` bucket.
 */
const layerPolicySeams = Layer.unwrapEffect(
  Effect.gen(function* () {
    const { nc, kv } = yield* Nats
    const data = yield* Effect.tryPromise({
      try: () => kv(Buckets.hostData),
      catch: (cause) => new LedgerError({ operation: "open host data bucket", message: String(cause), cause })
    })
    const counter = (name: string, principal: string) =>
      Effect.promise(() => data.get(`counter.${name}.${principal.replace(/[^A-Za-z0-9_-]/g, "_")}`).then((e) => (e?.operation === "PUT" ? Number(e.string()) || 0 : 0), () => 0))
    // Observers granted `publish` (notifiers, audit sinks) publish on the kernel's connection.
    const publish = (subject: string, text: string) => Effect.sync(() => nc.publish(subject, text))
    return layerProfileSeams.pipe(Layer.provide(Layer.merge(layerPluginHost.pipe(Layer.provide(layerPluginSourceObjectStore(nc))), layerHostEnvKv(data, counter, publish))))
  })
)

/** Stores every built plugin under `root` (plugin.wasm + manifest.json) in the object store, by digest. */
export const publishLocalPlugins = (root: string) =>
  Effect.gen(function* () {
    const { nc } = yield* Nats
    const dirs = findPluginDirs(root)
    for (const dir of dirs) {
      const a = readPluginDir(dir)
      yield* publishPlugin(nc, a.bytes, a.manifest)
    }
    return dirs.length
  })

/** Every service a kernel process runs on. Provisioning happens before the policy store reads its bucket. */
export const layerKernel = (opts: KernelOptions) => {
  const nats = layerNats(opts.nats)
  const provisioned = Layer.effectDiscard(provision(opts.replicas ?? 1, retentionOf(opts.config?.retention))).pipe(Layer.provide(nats))
  const seams = opts.adjudicator !== undefined || opts.admission !== undefined
    ? Layer.merge(opts.adjudicator ?? layerRuleAdjudicator, opts.admission ?? layerAdmitAll)
    : layerPolicySeams.pipe(Layer.provide(provisioned), Layer.provide(nats))
  const heldIds = layerHeldIds.pipe(Layer.provide(provisioned), Layer.provide(nats))
  const config = layerKernelConfig(opts.config ?? {})
  const tracing = Layer.scopedDiscard(Effect.acquireRelease(Effect.sync(() => startTracing("witness-kernel", opts.traceExporter)), () => Effect.promise(stopTracing)))
  const base = Layer.mergeAll(tracing, nats, config, layerAllowLatency.pipe(Layer.provide(config)), seams, heldIds)
  const stores = Layer.mergeAll(layerNatsLedger, layerPolicyStore(opts.profiles)).pipe(Layer.provide(provisioned), Layer.provideMerge(base))
  return layerHeldCalls.pipe(Layer.provideMerge(layerDriver.pipe(Layer.provideMerge(stores))))
}

/**
 * Serves the protocol and runs the controller until the scope closes. Stopping undoes this in
 * reverse: the loops stop taking work, the protocol answers the requests it took, and then the
 * drives already running (a released call's tool request, a delivery) finish, up to
 * `stopGraceMs`, while the connection is still open; what is left after that is the
 * recovery's, as after a crash.
 */
export const runKernel = Effect.gen(function* () {
  const store = yield* HeldCallStore
  const config = yield* KernelConfig
  yield* Effect.addFinalizer(() => Effect.promise(() => store.whenAllIdle()).pipe(Effect.interruptible, Effect.timeoutOption(stopGraceMs(config))))
  yield* serveProtocol
  yield* servePolicyApplyTool
  yield* serveStatus((yield* runPolicyReevaluation).working)
  yield* serveHealth
  yield* runController()
  const { owner, presenceIntervalMs } = yield* KernelConfig
  yield* runPresenceWatch(presenceIntervalMs)
  yield* runArchiver
  yield* runCheckpointer
  yield* runRecoverySweep
  const { nc } = yield* Nats
  return { owner, server: nc.getServer() }
})
