import { Effect, Either, Schema } from "effect"
import { canonicalize, sha256Hex } from "../schema/Canonical.js"
import type { Decision } from "../schema/Events.js"
import type { JsonValue } from "../schema/Json.js"
import { type HostValue, replayHostHandler } from "./HostEnv.js"
import { Stage } from "../schema/PluginManifest.js"
import { RerunError } from "./PluginError.js"
import { PinDefaults } from "../schema/PluginPin.js"
import { StageOutputs } from "../schema/StageIO.js"
import { capMemory } from "./internal/wasmBinary.js"
import { PluginRunner, type Runner } from "./internal/pluginRunner.js"
import { MeteredRunner } from "./internal/meteredRunner.js"
import { meterModule } from "./internal/wasmMeter.js"

/** What a re-run gave next to what was recorded. */
export interface RerunResult {
  readonly matches: boolean
  /** The recorded `result` or `fault`. */
  readonly recorded: JsonValue
  /** The re-run's `result` or `fault`. */
  readonly rerun: JsonValue
}

const RecordedOutput = Schema.Struct({
  stage: Stage,
  input: Schema.optional(Schema.Unknown),
  result: Schema.optional(Schema.Unknown),
  fault: Schema.optional(Schema.String)
})

const HostValueJson = Schema.Struct({ fn: Schema.String, arg: Schema.Unknown, value: Schema.optional(Schema.Unknown), fault: Schema.optional(Schema.String) })

/** A module compiled for re-runs: its memory capped, its user imports, and its metered build when the host would meter it. */
interface Prepared {
  readonly module: WebAssembly.Module
  readonly hostFunctions: ReadonlyArray<string>
  readonly metered?: WebAssembly.Module
}

const digests = new WeakMap<Uint8Array, string>()
/** The sha256 of wasm bytes, once per bytes object (a loader hands the same bytes for every decision of a plugin). */
const digestOf = (bytes: Uint8Array): string => {
  let d = digests.get(bytes)
  if (d === undefined) digests.set(bytes, (d = sha256Hex(bytes)))
  return d
}

/** Compiled modules by digest, memory cap and isolation: an audit re-runs thousands of decisions of a few plugins. */
const prepared = new Map<string, Promise<Prepared | { readonly detail: string }>>()
const PreparedLimit = 64

const prepare = (bytes: Uint8Array, digest: string, pages: number, isolation: "auto" | "worker"): Promise<Prepared | { readonly detail: string }> => {
  const key = `${digest}|${pages}|${isolation}`
  const hit = prepared.get(key)
  if (hit !== undefined) return hit
  const made = (async (): Promise<Prepared | { readonly detail: string }> => {
    const patched = capMemory(bytes, pages)
    if (!patched.ok) return { detail: patched.detail }
    const module = await WebAssembly.compile(new Uint8Array(patched.bytes))
    // Link exactly the user functions the module imports: all of them are served from the record.
    const hostFunctions = WebAssembly.Module.imports(module).filter((i) => i.module === "extism:host/user").map((i) => i.name)
    // The same isolation the host would pick: recorded host values answer synchronously, but a
    // plugin that reads kv or counters was run in a worker, and a re-run should match that.
    const asyncHost = hostFunctions.includes("wk_kv_get") || hostFunctions.includes("wk_counter")
    const metered = isolation === "auto" && !asyncHost ? meterModule(patched.bytes) : undefined
    return metered !== undefined && metered.ok ? { module, hostFunctions, metered: await WebAssembly.compile(new Uint8Array(metered.bytes)) } : { module, hostFunctions }
  })()
  if (prepared.size >= PreparedLimit) prepared.delete(prepared.keys().next().value!)
  prepared.set(key, made)
  made.catch(() => prepared.delete(key))
  return made
}

/**
 * Runners kept across re-runs, one per plugin, memory cap, isolation and stage: a runner resets
 * its instance after every call (and makes a new one after a trap), so decisions re-run on it one
 * after another see what a fresh instance would. `close` ends them all.
 */
export interface RerunSession {
  readonly runner: (key: string, start: () => Promise<Runner>) => Promise<Runner>
  readonly close: () => Promise<void>
}

export const makeRerunSession = (): RerunSession => {
  const runners = new Map<string, Promise<Runner>>()
  return {
    runner: (key, start) => {
      let r = runners.get(key)
      if (r === undefined) {
        runners.set(key, (r = start()))
        r.catch(() => runners.delete(key))
      }
      return r
    },
    close: async () => {
      const all = [...runners.values()]
      runners.clear()
      await Promise.all(all.map((r) => r.then((x) => x.close(), () => undefined)))
    }
  }
}

/**
 * Re-runs a recorded plugin decision from the pinned wasm: checks the bytes against the
 * recorded digest and the input against the recorded input digest, serves host functions
 * from the recorded values in order, and compares the outcome. The input is needed where the
 * record keeps only its digest: admission decisions (`input`, rebuilt from the tool result), and
 * transform and adjudicate decisions (`inputText`, the JCS text re-derived by StageInputs.ts
 * `deriveAdjudicationInputs` from the proposal, the decisions before it and the pin's config).
 */
export const rerunDecision = (
  bytes: Uint8Array,
  decision: Decision,
  options: { readonly input?: JsonValue; readonly inputText?: string; readonly timeout_ms?: number; readonly memory_max_pages?: number; readonly isolation?: "auto" | "worker"; readonly session?: RerunSession } = {}
): Effect.Effect<RerunResult, RerunError> =>
  Effect.gen(function* () {
    const fail = (detail: string) => new RerunError({ plugin: decision.by, detail })
    const digest = digestOf(bytes)
    if (decision.digest !== digest) return yield* Effect.fail(fail(`the bytes hash to ${digest}, the decision names ${decision.digest ?? "(none)"}`))
    const out = Schema.decodeUnknownEither(RecordedOutput)(decision.output)
    if (Either.isLeft(out)) return yield* Effect.fail(fail("the decision output is not a plugin decision record"))
    const { stage } = out.right
    const input = options.input ?? (out.right.input as JsonValue | undefined)
    const text = options.inputText ?? (input === undefined ? undefined : canonicalize(input))
    if (text === undefined) return yield* Effect.fail(fail("no input: the record keeps only its digest; pass the stage input re-derived from the log"))
    const inputDigest = sha256Hex(text)
    if (inputDigest !== decision.input_digest) return yield* Effect.fail(fail(`the input digests to ${inputDigest}, the decision records ${decision.input_digest ?? "(none)"}`))
    const recordedHost = Schema.decodeUnknownEither(Schema.Array(HostValueJson))(decision.host_values ?? [])
    if (Either.isLeft(recordedHost)) return yield* Effect.fail(fail("host_values are malformed"))
    const pages = options.memory_max_pages ?? PinDefaults.memory_max_pages
    const ready = yield* Effect.tryPromise({ try: () => prepare(bytes, digest, pages, options.isolation ?? "auto"), catch: (e) => fail(String(e)) })
    if ("detail" in ready) return yield* Effect.fail(fail(ready.detail))
    const spec = { label: decision.by, exports: [stage], hostFunctions: ready.hostFunctions, memoryMaxPages: pages }
    const start = (): Promise<Runner> => (ready.metered !== undefined ? MeteredRunner.start({ ...spec, module: ready.metered }) : PluginRunner.start({ ...spec, module: ready.module }))
    const session = options.session
    const runnerKey = `${digest}|${pages}|${options.isolation ?? "auto"}|${stage}`
    const runner: Runner = yield* Effect.tryPromise({ try: () => (session !== undefined ? session.runner(runnerKey, start) : start()), catch: (e) => fail(String(e)) })
    const raw = yield* Effect.promise(() =>
      runner.call(stage, new TextEncoder().encode(text), options.timeout_ms ?? PinDefaults.timeout_ms, replayHostHandler(recordedHost.right as ReadonlyArray<HostValue>))
    ).pipe(Effect.ensuring(session !== undefined ? Effect.void : Effect.promise(() => runner.close())))
    const recorded: JsonValue = out.right.fault !== undefined ? { fault: out.right.fault } : { result: (out.right.result ?? null) as JsonValue }
    let rerun: JsonValue
    if (raw.status !== "ok") rerun = { fault: raw.status }
    else {
      let parsed: unknown
      try {
        parsed = JSON.parse(raw.text)
      } catch {
        parsed = undefined
      }
      const decoded = parsed === undefined ? undefined : Schema.decodeUnknownEither(StageOutputs[stage] as Schema.Schema<unknown, unknown>)(parsed, { onExcessProperty: "error" })
      rerun = decoded !== undefined && Either.isRight(decoded) ? { result: (stage === "observe" ? {} : decoded.right) as JsonValue } : { fault: "bad_output" }
    }
    return { matches: canonicalize(recorded) === canonicalize(rerun), recorded, rerun }
  })
