// Runs a fuel-metered plugin on the calling thread: no hand-off at all, so a call costs about a
// bare Extism call. Time is bounded by fuel (wasmMeter.ts), memory by the module's capped
// memory and the host-allocation budget. Host functions must answer synchronously here, which
// is why plugins granted `kv` or `counter` (answered from NATS) run in a worker instead.
import createPlugin, { type CallContext, type Plugin } from "@extism/extism"
import type { JsonValue } from "../../schema/Json.js"
import type { HostHandler, RawOutcome, Runner } from "./pluginRunner.js"
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

class MemoryLimit extends Error {}
class HostFault extends Error {}

const MaxLogLines = 64

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
  #allocated = 0
  #memoryExceeded = false
  #error: string | null = null
  #logs: string[] = []
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
    const granted = new Set(this.#spec.hostFunctions)
    const budget = this.#spec.memoryMaxPages * 65536
    const text = (ctx: CallContext, addr: bigint) => ctx.read(addr)?.text() ?? ""
    const log = (ctx: CallContext, addr: bigint) => {
      if (this.#logs.length < MaxLogLines) this.#logs.push(text(ctx, addr).slice(0, 2048))
    }
    const sync = (fn: string, arg: JsonValue) => {
      const r = this.#host(fn, arg)
      if (r instanceof Promise) throw new HostFault(`host function ${fn} cannot answer synchronously in-process`)
      if ("fault" in r) throw new HostFault(r.fault)
      return r.value
    }
    const user: Record<string, (ctx: CallContext, ...args: Array<bigint>) => unknown> = {}
    if (granted.has("wk_log")) user["wk_log"] = log
    if (granted.has("wk_now")) user["wk_now"] = () => BigInt(Number(sync("wk_now", null)))
    if (granted.has("wk_kv_get"))
      user["wk_kv_get"] = (ctx, addr) => {
        const v = sync("wk_kv_get", text(ctx, addr!))
        return v === null ? 0n : ctx.store(String(v))
      }
    if (granted.has("wk_counter")) user["wk_counter"] = (ctx, addr) => Number(sync("wk_counter", text(ctx, addr!)))
    if (granted.has("wk_publish"))
      user["wk_publish"] = (ctx, subject, data) => {
        sync("wk_publish", { subject: text(ctx, subject!), data: text(ctx, data!) })
      }
    const env: Record<string, (ctx: CallContext, ...args: Array<bigint>) => unknown> = {
      alloc: (ctx, n) => {
        this.#allocated += Number(n)
        if (this.#allocated > budget) {
          this.#memoryExceeded = true
          throw new MemoryLimit(`host allocations over ${budget} bytes`)
        }
        return ctx.alloc(n!)
      },
      error_set: (ctx, addr) => {
        this.#error = text(ctx, addr!) || "error"
      }
    }
    if (granted.has("wk_log")) for (const level of ["log_info", "log_warn", "log_debug", "log_error"]) env[level] = log
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
    this.#allocated = 0
    this.#memoryExceeded = false
    this.#error = null
    this.#logs = []
    this.#host = host
    this.#fuel.value = budget
    let outcome: RawOutcome
    let broken = false
    try {
      const out = await this.#plugin.call([PluginModule, exportName], input)
      const elapsedMs = performance.now() - started
      if (this.#error !== null) outcome = { status: "plugin_error", text: this.#error, logs: this.#logs, elapsedMs }
      else if (out === null) outcome = { status: "no_output", text: "", logs: this.#logs, elapsedMs }
      else outcome = { status: "ok", text: out.text(), logs: this.#logs, elapsedMs }
    } catch (e) {
      broken = true
      const elapsedMs = performance.now() - started
      const message = (this.#error !== null ? this.#error + " / " : "") + (e instanceof Error ? `${e.name}: ${e.message}` : String(e))
      const status =
        (this.#fuel.value as bigint) <= 0n
          ? "timeout"
          : e instanceof HostFault
            ? "host_fault"
            : this.#memoryExceeded || e instanceof MemoryLimit || this.#memory.buffer.byteLength / 65536 > this.#spec.memoryMaxPages / 2
              ? "memory_limit"
              : "trap"
      outcome = { status, text: status === "timeout" ? `fuel budget of ${budget} units (${timeoutMs} ms) exhausted` : message, logs: this.#logs, elapsedMs }
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
