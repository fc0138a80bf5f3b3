// The main-thread side of one plugin worker: hands a call over through shared memory, serves
// the worker's host calls, and enforces the time limit by terminating the worker (then
// respawning it from the already-compiled module). This side never spins: it waits for the
// worker's answer with Atomics.waitAsync, so the event loop serves other requests meanwhile and
// a call costs one in-process Extism call plus two thread hand-offs. A metered module
// runs here too, under its fuel budget, so no plugin ever runs on the kernel's event loop.
import { Worker } from "node:worker_threads"
import type { JsonValue } from "../../schema/Json.js"
import { FuelExport } from "./wasmMeter.js"

const IDLE = 0, CALL = 1, DONE = 2, HOST = 3, HOST_REPLY = 4
const StatusNames = ["ok", "trap", "memory_limit", "plugin_error", "no_output", "host_fault", "too_large", "timeout"] as const

/** How a raw call ended. Everything but `ok` is a fault. */
export type RawStatus = (typeof StatusNames)[number] | "timeout" | "crashed"

export interface RawOutcome {
  readonly status: RawStatus
  /** Output text when `ok`, otherwise the fault message. */
  readonly text: string
  readonly logs: ReadonlyArray<string>
  readonly elapsedMs: number
}

/** Serves one host call from the plugin; a `fault` traps the plugin. */
export type HostHandler = (fn: string, arg: JsonValue) => Promise<{ readonly value: JsonValue } | { readonly fault: string }> | { readonly value: JsonValue } | { readonly fault: string }

/** Runs calls of one plugin instance under its limits: a worker, or metered in-process. */
export interface Runner {
  /** Never rejects: faults are outcomes. */
  readonly call: (exportName: string, input: Uint8Array, timeoutMs: number, host: HostHandler) => Promise<RawOutcome>
  readonly close: () => Promise<void>
}

export interface RunnerSpec {
  readonly label: string
  readonly module: WebAssembly.Module
  /** Export names the runner may call; calls name one by index. */
  readonly exports: ReadonlyArray<string>
  /** `extism:host/user` functions to link. */
  readonly hostFunctions: ReadonlyArray<string>
  readonly memoryMaxPages: number
  /** How long the worker spins for its next call before it blocks (ms); the main thread never spins. */
  readonly spinMs?: number
  /**
   * A metered module (wasmMeter.ts): fuel units per ms of `timeout_ms`, set before each call;
   * running out is the (deterministic) timeout, and the watchdog only stops what fuel cannot
   * (a host call that never returns) at `MeteredWatchdog(timeout_ms)`.
   */
  readonly fuelPerMs?: bigint
}

/**
 * When the watchdog stops a metered call: fuel is the limit (calibrated near 1 ns per unit, a
 * few times that on a loaded machine), so this is far past it, and a re-run stops where the
 * call did.
 */
export const MeteredWatchdog = (timeoutMs: number): number => Math.max(timeoutMs * 10, timeoutMs + 30_000)

// ES2024 pieces Node 20 has but the ES2022 lib does not declare.
interface GrowableSab extends SharedArrayBuffer {
  grow(byteLength: number): void
  readonly maxByteLength: number
}
const GrowableSharedArrayBuffer = SharedArrayBuffer as unknown as new (byteLength: number, options: { maxByteLength: number }) => GrowableSab
type WaitAsyncResult = { readonly async: false; readonly value: "not-equal" | "timed-out" } | { readonly async: true; readonly value: Promise<"ok" | "timed-out"> }
const waitAsync = (Atomics as unknown as { waitAsync: (a: Int32Array, index: number, value: number, timeoutMs: number) => WaitAsyncResult }).waitAsync

const MaxPayload = 64 * 1024 * 1024
const encoder = new TextEncoder()
const decoder = new TextDecoder()

interface Live {
  readonly worker: Worker
  readonly ctrl: Int32Array
  readonly dataSab: GrowableSab
  readonly data: Uint8Array
  readonly died: Promise<string>
  dead: boolean
}

const spawn = (spec: RunnerSpec): Promise<Live> =>
  new Promise((resolve, reject) => {
    const ctrlSab = new SharedArrayBuffer(64)
    const dataSab = new GrowableSharedArrayBuffer(64 * 1024, { maxByteLength: MaxPayload })
    const worker = new Worker(new URL("./pluginWorker.mjs", import.meta.url), {
      workerData: {
        module: spec.module,
        ctrl: ctrlSab,
        data: dataSab,
        exports: spec.exports,
        hostFunctions: spec.hostFunctions,
        memoryMaxPages: spec.memoryMaxPages,
        spinMs: spec.spinMs ?? 0,
        fuelPerMs: spec.fuelPerMs,
        fuelExport: FuelExport
      },
      // Caps the worker's JS heap; wasm memory is capped in the module, host blocks by budget.
      resourceLimits: { maxOldGenerationSizeMb: 64, maxYoungGenerationSizeMb: 16, stackSizeMb: 4 },
      execArgv: ["--no-warnings"],
      stdout: false,
      stderr: false
    })
    let settle: (why: string) => void = () => {}
    const died = new Promise<string>((r) => (settle = r))
    const live: Live = { worker, ctrl: new Int32Array(ctrlSab), dataSab, data: new Uint8Array(dataSab), died, dead: false }
    const onDeath = (why: string) => {
      live.dead = true
      // Wakes a call waiting for this worker's answer: it reads `dead` and reports the crash.
      Atomics.notify(live.ctrl, 0)
      settle(why)
      reject(new Error(why))
    }
    worker.once("error", (e) => onDeath(`worker error: ${e.message}`))
    worker.once("exit", (code) => onDeath(`worker exited with code ${code}`))
    worker.once("message", (m: { type: string; message?: string }) => {
      if (m.type === "ready") resolve(live)
      else {
        void worker.terminate()
        reject(new Error(m.message ?? "plugin failed to start"))
      }
    })
  })

/** A persistent worker running one plugin; calls are serialized. */
export class PluginRunner implements Runner {
  readonly #spec: RunnerSpec
  #live: Promise<Live>
  /** The live worker once it is ready, so an idle runner can hand a call over synchronously. */
  #ready: Live | undefined
  #tail: Promise<unknown> = Promise.resolve()
  #inFlight = 0
  #closed = false

  private constructor(spec: RunnerSpec, live: Live) {
    this.#spec = spec
    this.#live = Promise.resolve(live)
    this.#ready = live
  }

  /** Starts the worker and instantiates the plugin; rejects with the instantiation error. */
  static async start(spec: RunnerSpec): Promise<PluginRunner> {
    return new PluginRunner(spec, await spawn(spec))
  }

  /** Calls in flight or queued on this runner. */
  get inFlight(): number {
    return this.#inFlight
  }

  /** Resolves when every call handed to this runner so far has ended. */
  idle(): Promise<void> {
    return this.#tail.then(() => undefined)
  }

  /** Calls one export with input bytes under a time limit. Never rejects: faults are outcomes. */
  call(exportName: string, input: Uint8Array, timeoutMs: number, host: HostHandler): Promise<RawOutcome> {
    // Idle: the hand-over happens before this returns, so the caller's own work (hashing the
    // input) overlaps the plugin's. Busy: queue behind the call in flight.
    const idle = this.#inFlight === 0 && this.#ready !== undefined && !this.#ready.dead
    this.#inFlight++
    const run = (idle ? this.#call(exportName, input, timeoutMs, host) : this.#tail.then(() => this.#call(exportName, input, timeoutMs, host))).finally(() => {
      this.#inFlight--
    })
    this.#tail = run.catch(() => undefined)
    return run
  }

  async close(): Promise<void> {
    this.#closed = true
    const live = await this.#live.catch(() => undefined)
    if (live !== undefined && !live.dead) await live.worker.terminate()
  }

  #respawn(): void {
    this.#ready = undefined
    if (this.#closed) return
    this.#live = spawn(this.#spec)
    this.#live.then(
      (live) => {
        this.#ready = live
      },
      () => undefined
    )
  }

  async #call(exportName: string, input: Uint8Array, timeoutMs: number, host: HostHandler): Promise<RawOutcome> {
    const started = performance.now()
    const fault = (status: RawStatus, text: string): RawOutcome => ({ status, text, logs: [], elapsedMs: performance.now() - started })
    const index = this.#spec.exports.indexOf(exportName)
    if (index < 0) return fault("trap", `export '${exportName}' is not callable`)
    if (input.length > MaxPayload) return fault("too_large", `input of ${input.length} bytes is over ${MaxPayload}`)
    let live: Live
    try {
      live = this.#ready ?? (await this.#live)
      if (live.dead) throw new Error("worker is dead")
    } catch (e) {
      this.#respawn()
      return fault("crashed", `plugin worker unavailable: ${e instanceof Error ? e.message : String(e)}`)
    }
    const { ctrl, data, dataSab } = live
    if (data.byteLength < input.length) dataSab.grow(Math.min(MaxPayload, Math.max(input.length, data.byteLength * 2)))
    data.set(input, 0)
    ctrl[1] = input.length
    ctrl[4] = index
    ctrl[5] = timeoutMs
    Atomics.store(ctrl, 0, CALL)
    // A worker that has not gone to sleep since its last call (ctrl[6] is 0) sees CALL without
    // a wake; waking a sleeping thread is a system call. (Sequentially consistent atomics on
    // both sides: a worker that marks itself asleep after this read finds CALL in its wait.)
    if (Atomics.load(ctrl, 6) === 1) Atomics.notify(ctrl, 0)
    const limitMs = this.#spec.fuelPerMs !== undefined ? MeteredWatchdog(timeoutMs) : timeoutMs
    const deadline = started + limitMs
    for (;;) {
      // The worker's answer wakes this side through the event loop (waitAsync), so the
      // kernel keeps serving other requests while a plugin runs.
      const s = Atomics.load(ctrl, 0)
      if (s === DONE) {
        const len = ctrl[1]!
        const outLen = ctrl[3]!
        const status = StatusNames[ctrl[2]!] ?? "trap"
        const text = decoder.decode(data.slice(0, outLen))
        const logs = parseLogs(decoder.decode(data.slice(outLen, len)))
        Atomics.store(ctrl, 0, IDLE)
        return { status, text, logs, elapsedMs: performance.now() - started }
      }
      if (s === HOST) {
        const reply = await serveHost(host, decoder.decode(data.slice(0, ctrl[1])))
        const bytes = encoder.encode(JSON.stringify("value" in reply ? reply.value : reply.fault))
        if (data.byteLength < bytes.length) dataSab.grow(Math.min(MaxPayload, bytes.length))
        data.set(bytes, 0)
        ctrl[1] = bytes.length
        ctrl[2] = "value" in reply ? 0 : 1
        Atomics.store(ctrl, 0, HOST_REPLY)
        Atomics.notify(ctrl, 0)
        continue
      }
      const left = deadline - performance.now()
      if (left <= 0) break
      // The wait's own timeout is the deadline (no timer per call); a dying worker notifies it.
      const w = waitAsync(ctrl, 0, s, left)
      const woke = w.async ? await w.value : w.value
      if (woke === "timed-out") break
      if (live.dead) {
        this.#respawn()
        return fault("crashed", await live.died)
      }
    }
    // Over the time limit: the only reliable stop for running wasm is terminating its thread.
    live.dead = true
    await live.worker.terminate()
    this.#respawn()
    return fault("timeout", `no answer within ${limitMs} ms; worker terminated`)
  }
}

const serveHost = async (host: HostHandler, request: string): Promise<{ readonly value: JsonValue } | { readonly fault: string }> => {
  try {
    const parsed: unknown = JSON.parse(request)
    if (typeof parsed !== "object" || parsed === null || !("fn" in parsed) || typeof parsed.fn !== "string") return { fault: "malformed host call" }
    const arg = "arg" in parsed ? (parsed.arg as JsonValue) : null
    return await host(parsed.fn, arg)
  } catch (e) {
    return { fault: `host function failed: ${e instanceof Error ? e.message : String(e)}` }
  }
}

const parseLogs = (text: string): ReadonlyArray<string> => {
  try {
    const v: unknown = JSON.parse(text)
    return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []
  } catch {
    return []
  }
}
