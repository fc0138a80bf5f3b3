import { Effect, Either, Runtime } from "effect"
import { KernelVersion } from "../observability/KernelVersion.js"
import { kernelMetrics } from "../observability/KernelMetrics.js"
import { Nats } from "../ledger/Nats.js"
import { ControllerConsumer } from "../ledger/Provision.js"
import { KernelConfig } from "../KernelConfig.js"
import { PolicyStore } from "../policy/PolicyStore.js"
import type { ReadNonces } from "../ledger/ReadNonces.js"
import { ReaderRequest } from "../schema/Requests.js"
import { Streams, Subjects } from "../schema/Subjects.js"
import { readerFor } from "./ReadProof.js"
import { plainRequest } from "./Request.js"
import { respondJson } from "./internal/serveRequests.js"

/** One kernel process's health, as `wk.v1.health` answers it (the inbox and `wk status` show it). */
export interface KernelHealth {
  readonly owner: string
  readonly version: string
  readonly uptime_ms: number
  readonly policy_epoch: number
  readonly last_recovery_at: string | null
  /** Wakes waiting for the controllers (shared by every kernel): their lag; null if unread within a second. */
  readonly controller_lag: number | null
}

/**
 * `wk.v1.health`: every kernel process answers a signed reader (any principal the policy
 * registers, its key checked as for every signed read) with its `KernelHealth`; a bad proof
 * is a 401. Process details (pid, memory) stay on the operators' `wk.v1.admin.status`.
 */
export const serveHealth = Effect.gen(function* () {
  const { nc, jsm } = yield* Nats
  const { owner } = yield* KernelConfig
  const runtime = yield* Effect.runtime<PolicyStore | ReadNonces>()
  const started = Date.now()
  const lag = () =>
    Promise.race([
      jsm.consumers.info(Streams.wakes, ControllerConsumer).then((i) => i.num_pending),
      new Promise<null>((r) => setTimeout(() => r(null), 1000).unref())
    ]).catch(() => null)
  const answer = (data: Uint8Array) =>
    Effect.gen(function* () {
      const req = yield* plainRequest(data, ReaderRequest)
      // Every kernel answers the same read: its nonce is good once per kernel.
      const proved = yield* readerFor(req.reader, { operation: "health" }, [owner])
      if (Either.isLeft(proved)) return proved.left
      const policy = yield* (yield* PolicyStore).current
      const health: KernelHealth = {
        owner,
        version: KernelVersion,
        uptime_ms: Date.now() - started,
        policy_epoch: policy.epoch,
        last_recovery_at: kernelMetrics.marks.lastRecoveryAt === undefined ? null : new Date(kernelMetrics.marks.lastRecoveryAt).toISOString(),
        controller_lag: yield* Effect.promise(lag)
      }
      return { status: 200, kernel: health }
    }).pipe(Effect.catchTag("Rejected", (e) => Effect.succeed(e.reply)))
  const sub = nc.subscribe(Subjects.health, { callback: (_e, m) => void Runtime.runPromise(runtime)(answer(m.data)).then((reply) => respondJson(m, reply)) })
  yield* Effect.addFinalizer(() => Effect.sync(() => sub.unsubscribe()))
})
