import { Cause, Effect, Exit, Fiber, Runtime } from "effect"
import type { Msg, NatsConnection, Subscription } from "@nats-io/transport-node"
import { kernelMetrics } from "../../observability/KernelMetrics.js"

/** Queue group shared by every kernel process: each request is answered by one of them. */
export const QueueGroup = "wk-kernel"

const encoder = new TextEncoder()

/** Replies with a JSON body; a requester that is gone is not an error (the durable record holds the outcome). */
export const respondJson = (msg: Msg, body: unknown): void => {
  try {
    msg.respond(encoder.encode(JSON.stringify(body)))
  } catch {
    // The requester is gone.
  }
}

/**
 * The requests one server is answering, each on a fiber of its own, and how the server stops:
 * it takes no new request, answers the ones it took, and interrupts those still running after a
 * grace period (a blocking wait, a hung tool), which `onFailure` answers as it says.
 */
export class RequestsInFlight {
  readonly #fibers = new Set<Fiber.RuntimeFiber<unknown, unknown>>()
  #idle: Array<() => void> = []

  track(fiber: Fiber.RuntimeFiber<unknown, unknown>): void {
    this.#fibers.add(fiber)
    fiber.addObserver(() => {
      this.#fibers.delete(fiber)
      if (this.#fibers.size > 0) return
      const waiting = this.#idle
      this.#idle = []
      for (const resolve of waiting) resolve()
    })
  }

  get size(): number {
    return this.#fibers.size
  }

  /** Resolves once no request is being answered. */
  idle(): Promise<void> {
    return this.#fibers.size === 0 ? Promise.resolve() : new Promise((resolve) => this.#idle.push(resolve))
  }

  /**
   * Stops `subs`: requests already delivered to this process are still handed over, new ones go
   * to the other members of the queue group. Then waits up to `graceMs` for the requests taken to
   * be answered, and interrupts the rest.
   */
  close(subs: ReadonlyArray<Subscription>, graceMs: number): Effect.Effect<void> {
    return Effect.gen(this, function* () {
      yield* Effect.promise(() => Promise.all(subs.map((s) => s.drain().catch(() => undefined))))
      // Interruptible: this runs as a finalizer, where a timeout would otherwise wait for the wait it times out.
      yield* Effect.promise(() => this.idle()).pipe(Effect.interruptible, Effect.timeoutOption(graceMs))
      yield* Fiber.interruptAll([...this.#fibers])
    })
  }
}

/**
 * Serves `subject` in the kernel's queue group: each request runs `answer` on `runtime`, tracked
 * by `inFlight`, and is answered with its value; a failure, a defect or an interruption (the
 * server stopping) is answered with `onFailure(cause)`, or not at all when that is undefined.
 */
export const serveRequests = <E, R>(
  nc: NatsConnection,
  runtime: Runtime.Runtime<R>,
  inFlight: RequestsInFlight,
  subject: string,
  answer: (msg: Msg) => Effect.Effect<unknown, E, R>,
  onFailure: (cause: Cause.Cause<E>) => unknown
): Subscription => {
  const timer = kernelMetrics.requestSeconds.labels({ op: subject.slice(subject.lastIndexOf(".") + 1) })
  return nc.subscribe(subject, {
    queue: QueueGroup,
    callback: (err, msg) => {
      if (err !== null) return
      const started = performance.now()
      const fiber = Runtime.runFork(runtime)(answer(msg))
      // Answered before the fiber counts as done, so a stopping server has handed every answer to the connection.
      fiber.addObserver((exit) => {
        const body = Exit.isSuccess(exit) ? exit.value : onFailure(exit.cause)
        if (body !== undefined) respondJson(msg, body)
        timer.observe((performance.now() - started) / 1000)
      })
      inFlight.track(fiber)
    }
  })
}
