// The main-thread side of one plugin worker: hands calls over through shared memory (the calls
// waiting at a hand-off go together), serves the worker's host calls, and enforces each call's
// time limit by terminating the worker (then respawning it from the already-compiled module).
// This side never spins: it waits for the worker's answer with Atomics.waitAsync, so the event
// loop serves other requests meanwhile, and a call costs one in-process Extism call plus its
// share of two thread hand-offs. A metered module
// runs here too, under its fuel budget, so no plugin ever runs on the kernel's event loop.
import { Worker } from "node:worker_threads"
import type { JsonValue } from "../../schema/Json.js"
import { StatusNames } from "./pluginImports.mjs"
import { getU32, putU32 } from "./u32.mjs"
import { FuelExport } from "./wasmMeter.js"

const IDLE = 0, CALL = 1, DONE = 2, HOST = 3, HOST_REPLY = 4

/** How a raw call ended. Everything but `ok` is a fault. */
export type RawStatus = (typeof StatusNames)[number] | "timeout" | "crashed"

export interface RawOutcome {
  readonly status: RawStatus
  /** Output text when `ok`, otherwise the fault message. */
  readonly text: string
  readonly logs: ReadonlyArray<string>
  readonly elapsedMs: number
  /** Fuel the call spent (a metered module: about one unit per ns of straight-line code); absent when not metered. */
  readonly fuel?: number
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
  /** The time (ms since the epoch) the running call of a batch started, as the worker writes it. */
  readonly startedAt: Float64Array
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
    const live: Live = { worker, ctrl: new Int32Array(ctrlSab), startedAt: new Float64Array(ctrlSab, 48, 1), dataSab, data: new Uint8Array(dataSab), died, dead: false }
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

/** Most calls one hand-off carries. */
const MaxBatch = 32

/** A call waiting for its turn on the worker. */
interface Pending {
  readonly index: number
  readonly input: Uint8Array
  readonly timeoutMs: number
  readonly host: HostHandler
  readonly queuedAt: number
  readonly resolve: (outcome: RawOutcome) => void
}


/**
 * A persistent worker running one plugin; its calls run one after another. The calls waiting
 * when the worker is handed work go over together, in one hand-off, and the worker runs them
 * back to back: under load a call does not wait for the event loop to see the one before it end.
 * Each call keeps its own limits: its fuel, and a watchdog that runs from the call's own start.
 * A call the watchdog stops ends in `timeout`; the calls of its batch that ended keep their
 * results, and those it had not reached go over again to the respawned worker.
 */
export class PluginRunner implements Runner {
  readonly #spec: RunnerSpec
  #live: Promise<Live>
  /** The live worker once it is ready, so an idle runner can hand a call over synchronously. */
  #ready: Live | undefined
  readonly #queue: Array<Pending> = []
  #pumping = false
  #idle: Array<() => void> = []
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
  #inFlight = 0
  get inFlight(): number {
    return this.#inFlight
  }

  /** Resolves when every call handed to this runner so far has ended. */
  idle(): Promise<void> {
    return this.#inFlight === 0 ? Promise.resolve() : new Promise((resolve) => this.#idle.push(resolve))
  }

  /** Calls one export with input bytes under a time limit. Never rejects: faults are outcomes. */
  call(exportName: string, input: Uint8Array, timeoutMs: number, host: HostHandler): Promise<RawOutcome> {
    const queuedAt = performance.now()
    const index = this.#spec.exports.indexOf(exportName)
    if (index < 0) return Promise.resolve({ status: "trap", text: `export '${exportName}' is not callable`, logs: [], elapsedMs: 0 })
    if (input.length + 12 > MaxPayload) return Promise.resolve({ status: "too_large", text: `input of ${input.length} bytes is over ${MaxPayload}`, logs: [], elapsedMs: 0 })
    this.#inFlight++
    return new Promise<RawOutcome>((resolve) => {
      this.#queue.push({ index, input, timeoutMs, host, queuedAt, resolve: (o) => {
        this.#inFlight--
        resolve(o)
        if (this.#inFlight === 0) for (const r of this.#idle.splice(0)) r()
      } })
      // Idle: the hand-over happens before this returns, so the caller's own work (hashing the
      // input) overlaps the plugin's. Busy: the call goes with the next batch.
      if (!this.#pumping) void this.#pump()
    })
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

  async #pump(): Promise<void> {
    this.#pumping = true
    try {
      while (this.#queue.length > 0) {
        let live: Live
        try {
          live = this.#ready ?? (await this.#live)
          if (live.dead) throw new Error("worker is dead")
        } catch (e) {
          this.#respawn()
          const why = `plugin worker unavailable: ${e instanceof Error ? e.message : String(e)}`
          for (const p of this.#queue.splice(0)) p.resolve({ status: "crashed", text: why, logs: [], elapsedMs: performance.now() - p.queuedAt })
          return
        }
        let bytes = 0
        let n = 0
        while (n < this.#queue.length && n < MaxBatch && (n === 0 || bytes + 12 + this.#queue[n]!.input.length <= MaxPayload)) bytes += 12 + this.#queue[n++]!.input.length
        const batch = this.#queue.splice(0, n)
        const unreached = await this.#run(live, batch, bytes)
        this.#queue.unshift(...unreached)
      }
    } finally {
      this.#pumping = false
    }
  }

  /** Hands `batch` over and waits for it; resolves each call that ended and returns those the worker never reached. */
  async #run(live: Live, batch: ReadonlyArray<Pending>, bytes: number): Promise<ReadonlyArray<Pending>> {
    const { ctrl, data, dataSab, startedAt } = live
    if (data.byteLength < bytes) dataSab.grow(Math.min(MaxPayload, Math.max(bytes, data.byteLength * 2)))
    let at = 0
    for (const p of batch) {
      putU32(data, at, p.index)
      putU32(data, at + 4, p.timeoutMs)
      putU32(data, at + 8, p.input.length)
      data.set(p.input, at + 12)
      at += 12 + p.input.length
    }
    ctrl[1] = bytes
    ctrl[7] = 0
    ctrl[9] = batch.length
    startedAt[0] = Date.now()
    Atomics.store(ctrl, 8, 0)
    Atomics.store(ctrl, 0, CALL)
    // A worker that has not gone to sleep since its last call (ctrl[6] is 0) sees CALL without
    // a wake; waking a sleeping thread is a system call. (Sequentially consistent atomics on
    // both sides: a worker that marks itself asleep after this read finds CALL in its wait.)
    if (Atomics.load(ctrl, 6) === 1) Atomics.notify(ctrl, 0)
    let delivered = 0
    let outPos = 0
    /** Resolves every call that ended since the last look, from the worker's output. */
    const deliver = () => {
      const ended = Atomics.load(ctrl, 8)
      for (; delivered < ended; delivered++) {
        const status = StatusNames[getU32(data, outPos)] ?? "trap"
        const outLen = getU32(data, outPos + 4)
        const logsLen = getU32(data, outPos + 8)
        const elapsedUs = getU32(data, outPos + 12)
        // Thousands of fuel units; all ones: the module is not metered.
        const spent = getU32(data, outPos + 16)
        const text = decoder.decode(data.slice(outPos + 20, outPos + 20 + outLen))
        const logs = parseLogs(decoder.decode(data.slice(outPos + 20 + outLen, outPos + 20 + outLen + logsLen)))
        outPos += 20 + outLen + logsLen
        const p = batch[delivered]!
        // A call's time is its own run in the worker.
        p.resolve({ status, text, logs, elapsedMs: elapsedUs / 1000, ...(spent !== 0xffffffff ? { fuel: spent * 1000 } : {}) })
      }
    }
    for (;;) {
      // The worker's answer wakes this side through the event loop (waitAsync), so the
      // kernel keeps serving other requests while a plugin runs.
      const s = Atomics.load(ctrl, 0)
      if (s === DONE) {
        deliver()
        Atomics.store(ctrl, 0, IDLE)
        return []
      }
      if (s === HOST) {
        const p = batch[ctrl[7]!]!
        const from = ctrl[10]!
        const reply = await serveHost(p.host, decoder.decode(data.slice(from, from + ctrl[1]!)))
        const out = encoder.encode(JSON.stringify("value" in reply ? reply.value : reply.fault))
        if (data.byteLength < from + out.length) dataSab.grow(Math.min(MaxPayload, from + out.length))
        data.set(out, from)
        ctrl[1] = out.length
        ctrl[2] = "value" in reply ? 0 : 1
        Atomics.store(ctrl, 0, HOST_REPLY)
        Atomics.notify(ctrl, 0)
        continue
      }
      // The watchdog of the call running now, from its own start (the worker stamps a call's
      // start before it counts the one before it ended).
      const ended = Atomics.load(ctrl, 8)
      const running = batch[Math.min(ended, batch.length - 1)]!
      const limitMs = this.#spec.fuelPerMs !== undefined ? MeteredWatchdog(running.timeoutMs) : running.timeoutMs
      const left = startedAt[0]! + limitMs - Date.now()
      if (left > 0) {
        // The wait's own timeout is the deadline (no timer per call); a dying worker notifies it.
        const w = waitAsync(ctrl, 0, s, left)
        const woke = w.async ? await w.value : w.value
        if (live.dead) {
          deliver()
          this.#respawn()
          const why = await live.died
          batch[delivered]?.resolve({ status: "crashed", text: why, logs: [], elapsedMs: performance.now() - batch[delivered]!.queuedAt })
          return batch.slice(delivered + 1)
        }
        if (woke !== "timed-out") continue
        // Timed out: a later call may have started meanwhile (its own deadline), or this one overran.
        if (Atomics.load(ctrl, 0) !== s || Atomics.load(ctrl, 8) !== ended) continue
      }
      // Over the time limit: the only reliable stop for running wasm is terminating its thread.
      deliver()
      live.dead = true
      await live.worker.terminate()
      this.#respawn()
      const over = batch[delivered]
      over?.resolve({ status: "timeout", text: `no answer within ${limitMs} ms; worker terminated`, logs: [], elapsedMs: performance.now() - over.queuedAt })
      return batch.slice(delivered + 1)
    }
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
