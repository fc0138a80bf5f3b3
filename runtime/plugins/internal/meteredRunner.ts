// Runs a fuel-metered plugin on the calling thread: no hand-off at all, so a call costs about a
// bare Extism call. Time is bounded by fuel (wasmMeter.ts), memory by the module's capped
// memory and the host-allocation budget. Host functions must answer synchronously here, which
// is why plugins granted `kv` or `counter` (answered from NATS) run in a worker instead.
import createPlugin, { type CallContext, type Plugin } from "@extism/extism"
import type { JsonValue } from "../../schema/Json.js"
import type { HostHandler, RawOutcome, Runner } from "./pluginRunner.js"
import { callState, faultOf, HostFault, hostImports, type CallState } from "./pluginImports.mjs"
import { FuelExport } from "./wasmMeter.js"

/** Fuel units per millisecond of `timeout_ms`: about one loop iteration or call per nanosecond. */
export const FuelPerMs = 1_000_000n

export interface MeteredSpec {
  readonly label: string
  /** A module rewritten by `meterModule` (and `capMemory`). */
  readonly module: WebAssembly.Module
  readonly exports: ReadonlyArray<string>
  readonly hostFunctions: ReadonlyArray<string>
  readonly memoryMaxPages: number
}

/**
 * The module's name in the Extism manifest. Calls name it: given a bare export name, Extism
 * lists every module's exports (`WebAssembly.Module.exports`, an allocation) on each call.
 */
const PluginModule = "plugin"

/** One in-process plugin instance under a fuel budget; calls are serialized. */
export class MeteredRunner implements Runner {
  readonly #spec: MeteredSpec
  #plugin!: Plugin
  #fuel!: WebAssembly.Global
  #memory!: WebAssembly.Memory
  #tail: Promise<unknown> = Promise.resolve()
  // Per-call state the host functions see.
  #state: CallState = callState()
  #host: HostHandler = () => ({ fault: "no call in progress" })

  private constructor(spec: MeteredSpec) {
    this.#spec = spec
  }

  static async start(spec: MeteredSpec): Promise<MeteredRunner> {
    const r = new MeteredRunner(spec)
    await r.#instantiate()
    return r
  }

  async #instantiate(): Promise<void> {
    const hostCall = (fn: string, arg: JsonValue) => {
      const r = this.#host(fn, arg)
      if (r instanceof Promise) throw new HostFault(`host function ${fn} cannot answer synchronously in-process`)
      if ("fault" in r) throw new HostFault(r.fault)
      return r.value
    }
    const { env, user } = hostImports({ granted: new Set(this.#spec.hostFunctions), memoryMaxPages: this.#spec.memoryMaxPages, state: () => this.#state, hostCall })
    this.#plugin = await createPlugin({ wasm: [{ module: this.#spec.module, name: PluginModule }] }, { useWasi: false, functions: { "extism:host/env": env, "extism:host/user": user } })
    const instance = await this.#plugin.getInstance(PluginModule)
    this.#fuel = instance.exports[FuelExport] as WebAssembly.Global
    this.#memory = instance.exports["memory"] as WebAssembly.Memory
  }

  call(exportName: string, input: Uint8Array, timeoutMs: number, host: HostHandler): Promise<RawOutcome> {
    const run = this.#tail.then(() => this.#call(exportName, input, timeoutMs, host))
    this.#tail = run.catch(() => undefined)
    return run
  }

  async #call(exportName: string, input: Uint8Array, timeoutMs: number, host: HostHandler): Promise<RawOutcome> {
    const started = performance.now()
    if (!this.#spec.exports.includes(exportName)) return { status: "trap", text: `export '${exportName}' is not callable`, logs: [], elapsedMs: 0 }
    const budget = BigInt(timeoutMs) * FuelPerMs
    const state = (this.#state = callState())
    this.#host = host
    this.#fuel.value = budget
    let outcome: RawOutcome
    let broken = false
    const spent = () => Number(budget - ((this.#fuel.value as bigint) > 0n ? (this.#fuel.value as bigint) : 0n))
    try {
      const out = await this.#plugin.call([PluginModule, exportName], input)
      const elapsedMs = performance.now() - started
      const fuel = spent()
      if (state.error !== null) outcome = { status: "plugin_error", text: state.error, logs: state.logs, elapsedMs, fuel }
      else if (out === null) outcome = { status: "no_output", text: "", logs: state.logs, elapsedMs, fuel }
      else outcome = { status: "ok", text: out.text(), logs: state.logs, elapsedMs, fuel }
    } catch (error) {
      broken = true
      const elapsedMs = performance.now() - started
      const outOfFuel = (this.#fuel.value as bigint) <= 0n
      const memoryPages = this.#memory.buffer.byteLength / 65536
      outcome = { ...faultOf({ error, outOfFuel, budget, timeoutMs, state, memoryPages, memoryMaxPages: this.#spec.memoryMaxPages }), logs: state.logs, elapsedMs, fuel: spent() }
    }
    this.#host = () => ({ fault: "no call in progress" })
    // A trapped instance may be mid-allocation: never reuse it. Otherwise drop this call's blocks.
    if (broken) {
      await this.#plugin.close()
      await this.#instantiate()
    } else await this.#plugin.reset()
    return outcome
  }

  async close(): Promise<void> {
    await this.#plugin.close()
  }
}
