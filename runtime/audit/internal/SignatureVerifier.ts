import { availableParallelism } from "node:os"
import { Worker } from "node:worker_threads"

/** Verifies envelope signatures of raw event messages on worker threads while the replay reads. */
export interface SignatureVerifier {
  /** Queues the message at `seq` (its body carries an `envelope`). */
  readonly submit: (seq: number, data: Uint8Array) => void
  /** Every verdict so far, once all submitted batches are answered; then the workers stop. */
  readonly finish: () => Promise<ReadonlyMap<number, boolean>>
}

const BatchSize = 128

/**
 * A pool of `size` workers (default: one per spare core, at most 2; none on a single core, in
 * which case `finish` answers an empty map and the checks verify on the main thread). A worker
 * that fails leaves its messages unanswered: they are verified on the main thread too.
 */
export const makeSignatureVerifier = (size = Math.min(2, availableParallelism() - 1)): SignatureVerifier => {
  const verdicts = new Map<number, boolean>()
  if (size < 1) return { submit: () => undefined, finish: async () => verdicts }
  const pool = Array.from({ length: size }, () => {
    const worker = new Worker(new URL("./verifyWorker.mjs", import.meta.url), { execArgv: ["--no-warnings"], stdout: false, stderr: false })
    // A worker answers its batches in order: one queue of waiters per worker.
    const waiting: Array<() => void> = []
    worker.on("message", (answers: Array<[number, boolean]>) => {
      for (const [seq, ok] of answers) verdicts.set(seq, ok)
      waiting.shift()?.()
    })
    const release = () => waiting.splice(0).forEach((f) => f())
    worker.on("error", release)
    worker.on("exit", release)
    return { worker, waiting }
  })
  const pending: Array<Promise<void>> = []
  let batch: Array<[number, Uint8Array]> = []
  let next = 0
  const send = () => {
    if (batch.length === 0) return
    const w = pool[next++ % pool.length]!
    const sent = batch
    batch = []
    pending.push(new Promise<void>((resolve) => w.waiting.push(resolve)))
    w.worker.postMessage(sent)
  }
  return {
    submit: (seq, data) => {
      batch.push([seq, data.slice()])
      if (batch.length >= BatchSize) send()
    },
    finish: async () => {
      send()
      await Promise.all(pending)
      await Promise.all(pool.map((w) => w.worker.terminate()))
      return verdicts
    }
  }
}
