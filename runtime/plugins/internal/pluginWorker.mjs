// One plugin instance in its own thread. The main thread (pluginRunner.ts) hands calls over
// through shared memory and terminates this thread when a call overruns its time limit: the
// Extism SDK's own timeout does not stop a wasm loop, a terminated thread does.
// Protocol (mirrored in pluginRunner.ts): one hand-off carries a batch of calls, run one after
// another. ctrl[0] state, ctrl[1] byte length in `data` (the batch in; a host call's request and
// reply), ctrl[6] 1 while this thread sleeps between batches, ctrl[7] the index of the call
// running, ctrl[8] how many calls of the batch have ended, ctrl[9] how many calls the batch has,
// ctrl[10] where in `data` a host call's bytes are; the float at byte 48 the time (ms since the
// epoch) the running call started. In: per call [export index, timeout_ms, length] (u32) and the
// input bytes. Out, from offset 0, written as each call ends: per call [status, output length,
// logs length, elapsed us] (u32) and the output and log bytes. A metered module (wasmMeter.ts)
// gets `timeout_ms x fuelPerMs` units of fuel before each call and stops deterministically when
// they run out (timeout), as in meteredRunner.ts; pluginImports.mjs links both with the same host functions.
import { parentPort, workerData } from "node:worker_threads"
import createPlugin from "@extism/extism"
import { callState, faultOf, HostFault, hostImports, StatusNames } from "./pluginImports.mjs"
import { getU32, putU32 } from "./u32.mjs"

const IDLE = 0, CALL = 1, DONE = 2, HOST = 3, HOST_REPLY = 4
const [OK, PLUGIN_ERROR, NO_OUTPUT, TOO_LARGE] = ["ok", "plugin_error", "no_output", "too_large"].map((s) => StatusNames.indexOf(s))

const { module, ctrl: ctrlSab, data: dataSab, exports, hostFunctions, memoryMaxPages, spinMs, fuelPerMs, fuelExport } = workerData
const ctrl = new Int32Array(ctrlSab)
const data = new Uint8Array(dataSab)
const enc = new TextEncoder()
const dec = new TextDecoder()

/** The running call's record of allocations, error message and log lines. */
let state = callState()

const ensure = (n) => {
  if (data.byteLength >= n) return true
  if (n > dataSab.maxByteLength) return false
  dataSab.grow(Math.min(dataSab.maxByteLength, Math.max(n, data.byteLength * 2)))
  return true
}

// A synchronous call into the main thread, which serves it and records the value it returned.
const hostCall = (fn, arg) => {
  const req = enc.encode(JSON.stringify({ fn, arg }))
  // After the outputs of the calls that ended, which the main thread may still read.
  if (!ensure(outPos + req.length)) throw new HostFault("host call request too large")
  data.set(req, outPos)
  ctrl[10] = outPos
  ctrl[1] = req.length
  Atomics.store(ctrl, 0, HOST)
  Atomics.notify(ctrl, 0)
  while (Atomics.load(ctrl, 0) === HOST) Atomics.wait(ctrl, 0, HOST)
  const status = ctrl[2]
  const text = dec.decode(data.slice(outPos, outPos + ctrl[1]))
  Atomics.store(ctrl, 0, CALL)
  if (status !== OK) throw new HostFault(text)
  return JSON.parse(text)
}

const { env, user } = hostImports({ granted: new Set(hostFunctions), memoryMaxPages, state: () => state, hostCall })

let plugin
let memory
/** The metered module's fuel global, or null for a module that is not metered. */
let fuel = null
const instantiate = async () => {
  plugin = await createPlugin({ wasm: [{ module, name: "plugin" }] }, { useWasi: false, functions: { "extism:host/env": env, "extism:host/user": user } })
  const instance = await plugin.getInstance("plugin")
  memory = instance.exports.memory
  fuel = typeof fuelPerMs === "bigint" ? instance.exports[fuelExport] : null
}

/** Where the next call's output goes in `data`. */
let outPos = 0
const startedAt = new Float64Array(ctrlSab, 48, 1)

/** Fuel a call spent, in thousands of units (a u32 in the result header), or NoFuel for a module that is not metered. */
const NoFuel = 0xffffffff
const spentOf = (budget) => (fuel === null ? NoFuel : Math.min(NoFuel - 1, Number((budget - (fuel.value > 0n ? fuel.value : 0n)) / 1000n)))

/**
 * Writes one call's result after the previous one's and counts it ended: a 20-byte header
 * (status, output length, logs length, elapsed µs, fuel spent in thousands), the output, the logs.
 */
const finish = (status, out, elapsedUs, spent = NoFuel) => {
  const trailer = enc.encode(JSON.stringify(state.logs))
  if (!ensure(outPos + 20 + out.length + trailer.length)) {
    status = TOO_LARGE
    out = enc.encode("output too large")
    if (!ensure(outPos + 20 + out.length + 2)) return false
  }
  const logsBytes = status === TOO_LARGE ? enc.encode("[]") : trailer
  putU32(data, outPos, status)
  putU32(data, outPos + 4, out.length)
  putU32(data, outPos + 8, logsBytes.length)
  putU32(data, outPos + 12, Math.min(0xffffffff, Math.round(elapsedUs)))
  putU32(data, outPos + 16, spent)
  data.set(out, outPos + 20)
  data.set(logsBytes, outPos + 20 + out.length)
  outPos += 20 + out.length + logsBytes.length
  return true
}

const runCall = async (fn, input, timeoutMs) => {
  const t0 = performance.now()
  state = callState()
  let broken = false
  const budget = fuel !== null ? BigInt(timeoutMs) * fuelPerMs : 0n
  if (fuel !== null) fuel.value = budget
  try {
    const out = await plugin.call(["plugin", fn], input)
    const us = (performance.now() - t0) * 1000
    if (state.error !== null) finish(PLUGIN_ERROR, enc.encode(state.error), us, spentOf(budget))
    else if (out === null) finish(NO_OUTPUT, new Uint8Array(0), us, spentOf(budget))
    else finish(OK, out.bytes(), us, spentOf(budget))
  } catch (error) {
    broken = true
    const outOfFuel = fuel !== null && fuel.value <= 0n
    const { status, text } = faultOf({ error, outOfFuel, budget, timeoutMs, state, memoryPages: memory.buffer.byteLength / 65536, memoryMaxPages })
    finish(StatusNames.indexOf(status), enc.encode(text), (performance.now() - t0) * 1000, spentOf(budget))
  }
  return broken
}

/** Ready for the next call: a fresh instance after a fault, else the same one reset. */
const recycle = (broken) => (broken ? instantiate() : plugin.reset())

/** Runs every call of the batch in order, publishing each result as it ends; DONE after the last. */
const runBatch = async () => {
  const batch = data.slice(0, ctrl[1])
  const count = ctrl[9]
  outPos = 0
  let at = 0
  for (let i = 0; i < count; i++) {
    const fn = exports[getU32(batch, at)]
    const timeoutMs = getU32(batch, at + 4)
    const len = getU32(batch, at + 8)
    // Its own buffer: the SDK reads an input from offset 0 of its buffer.
    const input = batch.slice(at + 12, at + 12 + len)
    at += 12 + len
    ctrl[7] = i
    // Readied for the next call before the answer goes out: measured, a worker that answers and
    // then resets serves the next hand-off more slowly than one that is idle when it arrives.
    await recycle(await runCall(fn, input, timeoutMs))
    // The next call's start, before its predecessor counts as ended: the main thread's watchdog
    // never pairs a call with another's start. (The main thread stamps the first.)
    startedAt[0] = Date.now()
    Atomics.store(ctrl, 8, i + 1)
  }
  ctrl[1] = outPos
  Atomics.store(ctrl, 0, DONE)
  Atomics.notify(ctrl, 0)
}

const loop = async () => {
  for (;;) {
    let s = Atomics.load(ctrl, 0)
    if (s !== CALL) {
      const t0 = performance.now()
      while (s !== CALL && spinMs > 0 && performance.now() - t0 < spinMs) s = Atomics.load(ctrl, 0)
    }
    if (s !== CALL) {
      // A blocking wait wakes much faster than waitAsync (no trip through the event loop); the
      // timeout lets queued tasks run now and then; terminate() interrupts the wait.
      // ctrl[6] tells the main thread this side is asleep and a hand-over must notify it
      // (a notify that wakes a thread is a system call; one that finds no sleeper is not made).
      Atomics.store(ctrl, 6, 1)
      Atomics.wait(ctrl, 0, s, 500)
      Atomics.store(ctrl, 6, 0)
      await null
      continue
    }
    await runBatch()
  }
}

// A port listener keeps this thread alive between calls.
parentPort.on("message", () => {})
try {
  await instantiate()
  parentPort.postMessage({ type: "ready" })
  void IDLE
  loop()
} catch (e) {
  parentPort.postMessage({ type: "error", message: e instanceof Error ? e.message : String(e) })
}
