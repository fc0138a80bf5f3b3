import { Context, Deferred, Effect, Either, Exit, Layer } from "effect"
import { canonicalize, sha256Hex } from "../schema/Canonical.js"
import type { JsonValue } from "../schema/Json.js"
import type { HostValue } from "./HostEnv.js"
import { EgressRank, HostImportOf, type PluginManifest, type Stage } from "../schema/PluginManifest.js"
import { verifySignature } from "./Signing.js"
import { PluginLoadError } from "./PluginError.js"
import { pinLabel, resolvePin, type PluginPin, type ResolvedPin } from "../schema/PluginPin.js"
import { type PluginArtifact, PluginSource } from "./PluginSource.js"
import { capMemory } from "./internal/wasmBinary.js"
import { FuelPerMs, MeteredRunner } from "./internal/meteredRunner.js"
import { InlineFirstRunner } from "./internal/inlineFirstRunner.js"
import { meterModule } from "./internal/wasmMeter.js"
import type { HostHandler, RawOutcome, Runner, RunnerSpec } from "./internal/pluginRunner.js"
import { RunnerPool } from "./internal/runnerPool.js"

/** A verified, compiled, running plugin, ready for calls. */
export interface LoadedPlugin {
  readonly pin: ResolvedPin
  /** `name@version`. */
  readonly label: string
  /** sha256 of the wasm bytes (the plugin's identity). */
  readonly digest: string
  readonly manifest: PluginManifest
  /**
   * How a call is bounded: a fuel budget (deterministic), or only the watchdog that terminates its
   * worker at `timeout_ms`. A metered call spends at most a small part of its fuel on the event
   * loop before it moves to a worker thread; a worker call never runs on the event loop.
   */
  readonly isolation: "metered" | "worker"
  readonly runner: Runner
}

/** One call of one plugin, as the decision record needs it. */
export interface Invocation {
  readonly input: JsonValue
  /** sha256 of the exact input bytes (JCS of `input`). */
  readonly inputDigest: string
  readonly raw: RawOutcome
  readonly hostValues: ReadonlyArray<HostValue>
}

/** The plugin host: verifies and loads pinned plugins, and calls them under their limits. */
export class PluginHost extends Context.Tag("wk/PluginHost")<
  PluginHost,
  {
    /** Loads (once per pin identity) a plugin the profile pins; refuses with a PluginLoadError. */
    readonly load: (pin: PluginPin) => Effect.Effect<LoadedPlugin, PluginLoadError>
    /** Calls a stage export. Never fails: faults (timeout, trap, memory) are in `raw.status`. */
    readonly invoke: (plugin: LoadedPlugin, stage: Stage, input: JsonValue, host: HostHandler) => Effect.Effect<Invocation>
    /**
     * `invoke` in two steps: running the outer effect hands the call to the plugin's worker,
     * the inner one awaits its end. Calls of several plugins started before any is awaited run
     * side by side, each on its own worker, with no fiber per call. `text`, when given, is the
     * JCS text of `input` already built (StageInputs.ts), sent and hashed as it is.
     */
    readonly start: (plugin: LoadedPlugin, stage: Stage, input: JsonValue, host: HostHandler, text?: string) => Effect.Effect<Effect.Effect<Invocation>>
  }
>() {}

// Extism runtime imports a plugin may always use; log_* only with the `log` capability.
// Excluded on purpose: var_get/var_set (state across calls breaks re-runs), config_get
// (config travels in the input, so it is digested), http_* (no network).
const ExtismCore = new Set(["alloc", "free", "length", "length_unsafe", "load_u8", "load_u64", "store_u8", "store_u64", "input_length", "input_load_u8", "input_load_u64", "input_offset", "output_set", "error_set"])
const ExtismLog = new Set(["log_info", "log_warn", "log_debug", "log_error"])

const identityKey = (pin: ResolvedPin): string =>
  canonicalize({ name: pin.name, version: pin.version, sha256: pin.sha256, signer: pin.signer, stages: [...pin.stages].sort(), capabilities: pin.capabilities, egress: pin.egress, memory_max_pages: pin.memory_max_pages, isolation: pin.isolation })

/** Checks everything about a plugin that does not need it compiled. Pure. */
export const checkArtifact = (pin: ResolvedPin, artifact: PluginArtifact): Either.Either<PluginManifest, PluginLoadError> => {
  const fail = (problem: PluginLoadError["problem"], detail: string) => Either.left(new PluginLoadError({ plugin: pinLabel(pin), sha256: pin.sha256, problem, detail }))
  const digest = sha256Hex(artifact.bytes)
  if (digest !== pin.sha256) return fail("digest_mismatch", `the wasm bytes hash to ${digest}, the profile pins ${pin.sha256}`)
  const signed = artifact.manifest
  if (signed === undefined) return fail("unsigned", "no signed manifest is stored with the wasm")
  const sig = verifySignature(signed, pin.signer)
  if (Either.isLeft(sig)) return fail(sig.left.problem, sig.left.detail)
  const m = signed.manifest
  if (m.sha256 !== digest) return fail("manifest_mismatch", `the signed manifest names wasm ${m.sha256}, the bytes are ${digest}`)
  if (m.name !== pin.name || m.version !== pin.version) return fail("manifest_mismatch", `the signed manifest is ${pinLabel(m)}, the profile pins ${pinLabel(pin)}`)
  for (const s of pin.stages) if (!m.stages.includes(s)) return fail("stage_not_declared", `the profile grants stage '${s}', the manifest declares ${m.stages.join(", ")}`)
  const requested = m.capabilities
  for (const f of pin.capabilities.host_functions) if (!requested.host_functions.includes(f)) return fail("capability_not_requested", `the profile grants '${f}', which the manifest does not request`)
  if (pin.capabilities.host_functions.includes("kv")) {
    const granted = pin.capabilities.kv_prefix
    if (granted === undefined) return fail("capability_not_requested", "the profile grants 'kv' without a kv_prefix")
    if (requested.kv_prefix === undefined || !granted.startsWith(requested.kv_prefix)) return fail("capability_not_requested", `the profile grants kv prefix '${granted}', the manifest requests '${requested.kv_prefix ?? "(none)"}'`)
  }
  for (const c of pin.capabilities.counters ?? []) if (!(requested.counters ?? []).includes(c)) return fail("capability_not_requested", `the profile grants counter '${c}', which the manifest does not request`)
  if (pin.capabilities.host_functions.includes("publish")) {
    const granted = pin.capabilities.publish_prefix
    if (granted === undefined) return fail("capability_not_requested", "the profile grants 'publish' without a publish_prefix")
    if (requested.publish_prefix === undefined || !granted.startsWith(requested.publish_prefix)) return fail("capability_not_requested", `the profile grants publish prefix '${granted}', the manifest requests '${requested.publish_prefix ?? "(none)"}'`)
    // Published messages carry what the plugin saw to whoever subscribes.
    if (m.egress !== "external") return fail("egress_exceeds", "the 'publish' capability hands data to outside subscribers: its manifest must declare egress 'external'")
  }
  if (EgressRank[m.egress] > EgressRank[pin.egress]) return fail("egress_exceeds", `the manifest declares egress '${m.egress}', the profile allows '${pin.egress}'`)
  // Log lines carry whatever the plugin saw (tool results included) into kernel logs.
  if (pin.capabilities.host_functions.includes("log") && EgressRank[m.egress] < EgressRank.kernel) return fail("egress_exceeds", "the 'log' capability lets data leave the plugin: its manifest must declare egress 'kernel' or wider")
  return Either.right(m)
}

/** Checks a compiled module's imports and exports against what the pin grants. Pure. */
export const checkLinkage = (pin: ResolvedPin, module: WebAssembly.Module): Either.Either<ReadonlyArray<string>, PluginLoadError> => {
  const fail = (problem: PluginLoadError["problem"], detail: string) => Either.left(new PluginLoadError({ plugin: pinLabel(pin), sha256: pin.sha256, problem, detail }))
  const grantedUser = new Set(pin.capabilities.host_functions.map((c) => HostImportOf[c]))
  const logGranted = pin.capabilities.host_functions.includes("log")
  for (const imp of WebAssembly.Module.imports(module)) {
    const ok =
      imp.kind === "function" &&
      ((imp.module === "extism:host/env" && (ExtismCore.has(imp.name) || (logGranted && ExtismLog.has(imp.name)))) || (imp.module === "extism:host/user" && grantedUser.has(imp.name)))
    if (!ok) return fail("ungranted_import", `the wasm imports ${imp.kind} ${imp.module}/${imp.name}, which the profile does not grant`)
  }
  const exports = new Map(WebAssembly.Module.exports(module).map((e) => [e.name, e.kind]))
  if (exports.get("memory") !== "memory") return fail("missing_export", "the wasm does not export its memory")
  for (const s of pin.stages) if (exports.get(s) !== "function") return fail("missing_export", `the wasm has no '${s}' function for the granted stage`)
  return Either.right([...grantedUser])
}

/** Builds the host. Runners (one worker per loaded plugin) are terminated when the scope closes. */
export const makePluginHost = Effect.gen(function* () {
  const source = yield* PluginSource
  const modules = new Map<string, WebAssembly.Module>()
  const loads = new Map<string, Deferred.Deferred<LoadedPlugin, PluginLoadError>>()
  const runners = new Set<Runner>()
  let closed = false
  yield* Effect.addFinalizer(() =>
    Effect.promise(() => {
      closed = true
      return Promise.all([...runners].map((r) => r.close()))
    })
  )

  const loadResolved = (pin: ResolvedPin): Effect.Effect<LoadedPlugin, PluginLoadError> =>
    Effect.gen(function* () {
      const fail = (problem: PluginLoadError["problem"], detail: string) => new PluginLoadError({ plugin: pinLabel(pin), sha256: pin.sha256, problem, detail })
      const artifact = yield* source.fetch(pin.sha256).pipe(Effect.mapError((e) => fail("not_found", e.detail)))
      const manifest = yield* checkArtifact(pin, artifact)
      const patched = capMemory(artifact.bytes, pin.memory_max_pages)
      if (!patched.ok) return yield* Effect.fail(fail(patched.problem, patched.detail))
      const compile = (key: string, bytes: Uint8Array) =>
        Effect.suspend(() => {
          const hit = modules.get(key)
          if (hit !== undefined) return Effect.succeed(hit)
          return Effect.tryPromise({ try: () => WebAssembly.compile(new Uint8Array(bytes)), catch: (e) => fail("invalid_wasm", e instanceof Error ? e.message : String(e)) }).pipe(
            Effect.tap((m) => Effect.sync(() => modules.set(key, m)))
          )
        })
      const module = yield* compile(`${pin.sha256}:${pin.memory_max_pages}`, patched.bytes)
      const hostFunctions = yield* checkLinkage(pin, module)
      const spec = { label: pinLabel(pin), exports: pin.stages, hostFunctions, memoryMaxPages: pin.memory_max_pages }
      // KV and counter reads are asynchronous (NATS), so those plugins need a thread that can block.
      const asyncHost = pin.capabilities.host_functions.some((c) => c === "kv" || c === "counter")
      const metered = pin.isolation === "auto" && !asyncHost ? meterModule(patched.bytes) : undefined
      // The workers: every call of a worker plugin, and the metered calls that need more than the inline fuel.
      const instantiateFailed = (e: unknown) => fail("instantiate_failed", e instanceof Error ? e.message : String(e))
      const start = (s: RunnerSpec) => Effect.tryPromise({ try: () => RunnerPool.start(s), catch: instantiateFailed })
      // A metered plugin with no effectful host function answers most calls on the event loop
      // under a small fuel budget and the rest on its workers (internal/inlineFirstRunner.ts).
      const inlineFirst = (m: WebAssembly.Module, workers: Runner) =>
        hostFunctions.includes(HostImportOf.publish)
          ? Effect.succeed<Runner>(workers)
          : Effect.tryPromise({
              try: () => MeteredRunner.start({ label: spec.label, module: m, exports: spec.exports, hostFunctions, memoryMaxPages: spec.memoryMaxPages }),
              catch: instantiateFailed
            }).pipe(
              Effect.map((inline): Runner => new InlineFirstRunner(inline, workers)),
              Effect.tapError(() => Effect.promise(() => workers.close()))
            )
      const started: { runner: Runner; isolation: LoadedPlugin["isolation"] } =
        metered !== undefined && metered.ok
          ? {
              isolation: "metered",
              runner: yield* compile(`${pin.sha256}:${pin.memory_max_pages}:metered`, metered.bytes).pipe(
                Effect.flatMap((m) => Effect.flatMap(start({ ...spec, module: m, fuelPerMs: FuelPerMs }), (workers) => inlineFirst(m, workers)))
              )
            }
          : { isolation: "worker", runner: yield* start({ ...spec, module }) }
      const runner = started.runner
      if (closed) {
        yield* Effect.promise(() => runner.close())
        return yield* Effect.fail(fail("instantiate_failed", "the plugin host is closed"))
      }
      runners.add(runner)
      return { pin, label: pinLabel(pin), digest: pin.sha256, manifest, isolation: started.isolation, runner }
    })

  // Pins are immutable values from the decoded profile: resolve each one once.
  const resolved = new WeakMap<PluginPin, { readonly pin: ResolvedPin; readonly key: string }>()
  const loaded = new WeakMap<PluginPin, LoadedPlugin>()
  const load = (raw: PluginPin): Effect.Effect<LoadedPlugin, PluginLoadError> =>
    Effect.suspend(() => {
      let r = resolved.get(raw)
      if (r === undefined) {
        const p = resolvePin(raw)
        r = { pin: p, key: identityKey(p) }
        resolved.set(raw, r)
      }
      const { pin, key } = r
      const ready = loaded.get(raw)
      if (ready !== undefined) return Effect.succeed(ready)
      const pending = loads.get(key)
      // Limits and config that are per call come from this pin, not from whichever pin loaded first.
      const withPin = (p: LoadedPlugin): LoadedPlugin => {
        const mine = { ...p, pin }
        loaded.set(raw, mine)
        return mine
      }
      if (pending !== undefined) return Deferred.await(pending).pipe(Effect.map(withPin))
      const d = Deferred.unsafeMake<LoadedPlugin, PluginLoadError>(undefined as never)
      loads.set(key, d)
      return loadResolved(pin).pipe(
        Effect.exit,
        Effect.tap((exit) => {
          // Refusals are not cached: a fixed store or a fixed profile should load on the next try.
          if (Exit.isFailure(exit)) loads.delete(key)
          return Deferred.done(d, exit)
        }),
        Effect.flatMap((exit) => exit),
        Effect.map(withPin)
      )
    })

  const encoder = new TextEncoder()
  const start = (plugin: LoadedPlugin, stage: Stage, input: JsonValue, host: HostHandler, text?: string): Effect.Effect<Effect.Effect<Invocation>> =>
    Effect.sync(() => {
      const bytes = encoder.encode(text ?? canonicalize(input))
      const hostValues: HostValue[] = []
      // Keeps synchronous answers synchronous (in-process plugins need them).
      const recording: HostHandler = (fn, arg) => {
        const record = (r: { readonly value: JsonValue } | { readonly fault: string }) => {
          hostValues.push("value" in r ? { fn, arg, value: r.value } : { fn, arg, fault: r.fault })
          return r
        }
        const r = host(fn, arg)
        return r instanceof Promise ? r.then(record) : record(r)
      }
      const pending = plugin.runner.call(stage, bytes, plugin.pin.timeout_ms, recording)
      // Hashed while the plugin runs on its own thread.
      const inputDigest = sha256Hex(bytes)
      return Effect.promise(() => pending).pipe(Effect.map((raw): Invocation => ({ input, inputDigest, raw, hostValues })))
    })

  const invoke = (plugin: LoadedPlugin, stage: Stage, input: JsonValue, host: HostHandler): Effect.Effect<Invocation> => Effect.flatten(start(plugin, stage, input, host))

  return PluginHost.of({ load, invoke, start })
})

/** The plugin host over a PluginSource; its workers live as long as the layer. */
export const layerPluginHost = Layer.scoped(PluginHost, makePluginHost)
