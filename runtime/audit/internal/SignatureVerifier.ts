import { availableParallelism } from "node:os"
import { Worker } from "node:worker_threads"

/** Verifies envelope signatures of raw commit messages on worker threads while the replay reads. */
export interface SignatureVerifier {
  /** Queues the commit at `seq` (its events may carry an `envelope`; a commit without any is answered "none"). */
  readonly submit: (seq: number, data: Uint8Array) => void
  /** Sends the batch being filled (the end of a read). */
  readonly flush: () => void
  /**
   * The verdict on the envelopes of the commit at `seq`: true (every one verifies) or false (one
   * does not) once a worker answered, undefined when no worker did (not submitted, no envelope
   * found, a worker failed, no pool): the checks then verify those envelopes themselves.
   */
  readonly verdict: (seq: number) => boolean | undefined
  /** False while a worker still owes the answer for `seq`. */
  readonly answered: (seq: number) => boolean
  /** Resolves when the next batch is answered (at once when none is outstanding). */
  readonly next: () => Promise<void>
  /** Every verdict, once all submitted batches are answered; then the workers stop. */
  readonly finish: () => Promise<ReadonlyMap<number, boolean>>
}

/** Envelopes per batch: small enough that answers arrive while the checks run, large enough to keep messages few. */
const BatchSize = 64
const BatchBytes = 128 * 1024

/** A worker's answer per message (verifyWorker.mjs). */
const Answer = { bad: 0, ok: 1, none: 2 } as const

/** Default pool size: none on one core (the checks verify), else every core but one, at least 2 and at most 4. */
export const defaultVerifyWorkers = (): number => {
  const cores = availableParallelism()
  return cores <= 1 ? 0 : Math.min(4, Math.max(2, cores - 1))
}

/** How long an idle worker is kept for the next replay in this process. */
const IdleMs = 30_000

/**
 * Workers outlive one replay: a fresh isolate spends about as long starting and compiling its
 * hot path (JSON, JCS, the crypto bindings) as it then spends verifying 1,000 envelopes. Idle
 * workers hold no reference on the event loop and stop after `IdleMs`.
 */
const idle: Array<{ readonly worker: Worker; timer: ReturnType<typeof setTimeout> }> = []

const spawn = (): Worker => {
  const worker = new Worker(new URL("./verifyWorker.mjs", import.meta.url), { execArgv: ["--no-warnings"], stdout: false, stderr: false })
  // A worker that fails leaves the idle list for good.
  const drop = () => {
    const i = idle.findIndex((x) => x.worker === worker)
    if (i >= 0) clearTimeout(idle.splice(i, 1)[0]!.timer)
  }
  worker.on("error", drop)
  worker.on("exit", drop)
  return worker
}

const acquire = (): Worker => {
  const hit = idle.pop()
  if (hit === undefined) return spawn()
  clearTimeout(hit.timer)
  hit.worker.ref()
  return hit.worker
}

const release = (worker: Worker): void => {
  worker.unref()
  const timer = setTimeout(() => {
    const i = idle.findIndex((x) => x.worker === worker)
    if (i >= 0) idle.splice(i, 1)
    void worker.terminate()
  }, IdleMs)
  timer.unref()
  idle.push({ worker, timer })
}

/**
 * A pool of `size` workers (default `defaultVerifyWorkers()`; with none, every verdict is
 * undefined and the checks verify on the main thread). A batch is one transferred buffer (the
 * bodies back to back), so the main thread copies each body once and structured-clones nothing.
 * A worker that fails leaves its messages without a verdict: they are verified on the main thread.
 */
export const makeSignatureVerifier = (size = defaultVerifyWorkers()): SignatureVerifier => {
  const verdicts = new Map<number, boolean>()
  /** Seqs submitted and not yet answered. */
  const owed = new Set<number>()
  let wake: Array<() => void> = []
  const notify = () => {
    const w = wake
    wake = []
    for (const f of w) f()
  }
  if (size < 1) {
    return {
      submit: () => undefined,
      flush: () => undefined,
      verdict: () => undefined,
      answered: () => true,
      next: async () => undefined,
      finish: async () => verdicts
    }
  }
  interface Slot {
    readonly worker: Worker
    /** Seqs of each batch sent and not answered, in order (a worker answers in order). */
    readonly batches: Array<Float64Array>
    dead: boolean
    readonly onMessage: (answers: Uint8Array) => void
    readonly onFailure: () => void
  }
  const giveUp = (slot: Slot) => {
    slot.dead = true
    for (const seqs of slot.batches.splice(0)) for (const s of seqs) owed.delete(s)
    notify()
  }
  const pool: Array<Slot> = Array.from({ length: size }, () => {
    const worker = acquire()
    const slot: Slot = {
      worker,
      batches: [],
      dead: false,
      onMessage: (answers) => {
        const seqs = slot.batches.shift()
        if (seqs === undefined) return
        for (let i = 0; i < seqs.length; i++) {
          const s = seqs[i]!
          owed.delete(s)
          const a = answers[i]
          if (a === Answer.ok) verdicts.set(s, true)
          else if (a === Answer.bad) verdicts.set(s, false)
        }
        notify()
      },
      onFailure: () => giveUp(slot)
    }
    worker.on("message", slot.onMessage)
    worker.on("error", slot.onFailure)
    worker.on("exit", slot.onFailure)
    return slot
  })
  let finished = false

  let bytes = new Uint8Array(BatchBytes)
  let used = 0
  let seqs: Array<number> = []
  let ends: Array<number> = []
  const send = () => {
    if (seqs.length === 0) return
    const live = pool.filter((p) => !p.dead)
    const batchSeqs = Float64Array.from(seqs)
    const batch = { seqs: batchSeqs, ends: Uint32Array.from(ends), bytes: bytes.subarray(0, used) }
    seqs = []
    ends = []
    used = 0
    bytes = new Uint8Array(BatchBytes)
    if (live.length === 0) {
      for (const s of batchSeqs) owed.delete(s)
      return
    }
    // The worker with the least outstanding work: they share the cores with the reader.
    const slot = live.reduce((a, b) => (b.batches.length < a.batches.length ? b : a))
    slot.batches.push(batchSeqs)
    slot.worker.postMessage(batch, [batch.bytes.buffer as ArrayBuffer])
  }
  return {
    submit: (seq, data) => {
      if (used + data.length > bytes.length) {
        send()
        if (data.length > bytes.length) bytes = new Uint8Array(data.length)
      }
      bytes.set(data, used)
      used += data.length
      seqs.push(seq)
      ends.push(used)
      owed.add(seq)
      if (seqs.length >= BatchSize) send()
    },
    flush: send,
    verdict: (seq) => verdicts.get(seq),
    answered: (seq) => !owed.has(seq),
    next: () => (owed.size === 0 ? Promise.resolve() : new Promise<void>((resolve) => wake.push(resolve))),
    finish: async () => {
      send()
      while (owed.size > 0) await new Promise<void>((resolve) => wake.push(resolve))
      if (!finished) {
        finished = true
        for (const p of pool) {
          p.worker.off("message", p.onMessage)
          p.worker.off("error", p.onFailure)
          p.worker.off("exit", p.onFailure)
          if (!p.dead) release(p.worker)
        }
      }
      return verdicts
    }
  }
}
