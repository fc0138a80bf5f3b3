import { Cause, Effect, Runtime } from "effect"
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
 * Serves `subject` in the kernel's queue group: each request runs `answer` on `runtime` and is
 * answered with its value; a failure or defect is answered with `onFailure(cause)`.
 */
export const serveRequests = <E, R>(
  nc: NatsConnection,
  runtime: Runtime.Runtime<R>,
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
      void Runtime.runPromiseExit(runtime)(answer(msg)).then((exit) => {
        respondJson(msg, exit._tag === "Success" ? exit.value : onFailure(exit.cause))
        timer.observe((performance.now() - started) / 1000)
      })
    }
  })
}
