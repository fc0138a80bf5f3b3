import { Worker } from "node:worker_threads"

/** What the worker found in one body: why it is not JSON, or its envelope outline and whether the signature verifies. */
export type OffThreadVerdict = { readonly invalid: string } | { readonly head: unknown; readonly valid: boolean }

/** Bodies up to this size are checked on the event loop: that costs less than the hand-off. */
export const InlineBytes = 64 * 1024
/** Most large bodies waiting for or in the worker at once; beyond it a request is answered 503. */
export const MaxLargeInFlight = 16
/** A worker that has not answered a body in this long is terminated, and what it held is answered 503. */
export const WatchdogMs = 10_000

/** The worker could not check the body (too many in flight, overran the watchdog, or died). */
export class CheckUnavailable extends Error {}

interface Pending {
  readonly resolve: (v: OffThreadVerdict) => void
  readonly reject: (e: CheckUnavailable) => void
  readonly timer: ReturnType<typeof setTimeout>
}

let worker: Worker | undefined
const pending = new Map<number, Pending>()
let nextId = 0

/** Fails everything the worker holds and forgets it: the next body starts a fresh one. */
const drop = (w: Worker, why: string) => {
  if (worker !== w) return
  worker = undefined
  void w.terminate()
  for (const p of pending.values()) {
    clearTimeout(p.timer)
    p.reject(new CheckUnavailable(why))
  }
  pending.clear()
}

const start = (): Worker => {
  const w = new Worker(new URL("./envelopeWorker.mjs", import.meta.url), {
    execArgv: ["--no-warnings"],
    // Bounds the worker's heap: a 1 MiB body parses into far less than this.
    resourceLimits: { maxOldGenerationSizeMb: 256 },
    stdout: false,
    stderr: false
  })
  // The kernel's connection keeps the process alive; an idle checker must not.
  w.unref()
  w.on("message", (m: { id: number } & OffThreadVerdict) => {
    const p = pending.get(m.id)
    if (p === undefined) return
    pending.delete(m.id)
    clearTimeout(p.timer)
    p.resolve("invalid" in m ? { invalid: m.invalid } : { head: m.head, valid: m.valid })
  })
  w.on("error", (e) => drop(w, `envelope worker failed: ${e.message}`))
  w.on("exit", (code) => drop(w, `envelope worker exited with code ${code}`))
  return w
}

/**
 * Parses a large body and verifies its signature on a worker thread, so a large body with a
 * bad signature costs the event loop a copy, not a parse and a canonicalization: small calls
 * keep their latency while large ones queue for the worker. A watchdog terminates a worker
 * that overruns `WatchdogMs`.
 */
export const checkOffThread = (data: Uint8Array): Promise<OffThreadVerdict> => {
  if (pending.size >= MaxLargeInFlight) return Promise.reject(new CheckUnavailable(`${MaxLargeInFlight} large requests are being checked; retry`))
  const w = (worker ??= start())
  const id = ++nextId
  const bytes = data.slice()
  return new Promise<OffThreadVerdict>((resolve, reject) => {
    const timer = setTimeout(() => drop(w, `envelope check overran ${WatchdogMs} ms`), WatchdogMs)
    timer.unref()
    pending.set(id, { resolve, reject, timer })
    w.postMessage({ id, bytes }, [bytes.buffer as ArrayBuffer])
  })
}
