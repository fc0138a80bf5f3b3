import { Effect } from "effect"
import { Subjects } from "../schema/Subjects.js"
import { KernelVersion } from "../observability/KernelVersion.js"
import { kernelMetrics } from "../observability/KernelMetrics.js"
import { Nats } from "../ledger/Nats.js"
import { KernelConfig } from "../KernelConfig.js"
import { PolicyStore } from "../policy/PolicyStore.js"
import type { ReevaluationWork } from "../loops/PolicyReevaluation.js"

/** `wk.v1.admin.status`: every kernel process answers (no queue group) with its own figures. */
export const StatusSubject = Subjects.adminStatus

/** `working`: the shard of a policy re-evaluation this process is walking now, if any. */
export const serveStatus = (working: Effect.Effect<ReevaluationWork | null>) => Effect.gen(function* () {
  const { nc } = yield* Nats
  const { owner } = yield* KernelConfig
  const policies = yield* PolicyStore
  const started = Date.now()
  const sub = nc.subscribe(StatusSubject, {
    callback: (_e, m) => {
      void Effect.runPromise(Effect.all([policies.current, working])).then(([policy, reevaluating]) => {
        // With --expose-gc, collect first so resident memory reflects live data, not garbage.
        const gc = (globalThis as { gc?: () => void }).gc
        if (gc !== undefined && m.data.length > 0 && new TextDecoder().decode(m.data).includes("gc")) gc()
        const mem = process.memoryUsage()
        m.respond(
          JSON.stringify({
            owner,
            pid: process.pid,
            uptime_ms: Date.now() - started,
            policy_epoch: policy.epoch,
            reevaluating,
            version: KernelVersion,
            last_recovery_at: kernelMetrics.marks.lastRecoveryAt === undefined ? null : new Date(kernelMetrics.marks.lastRecoveryAt).toISOString(),
            memory: { rss: mem.rss, heap_used: mem.heapUsed, heap_total: mem.heapTotal, external: mem.external }
          })
        )
      })
    }
  })
  yield* Effect.addFinalizer(() => Effect.sync(() => sub.unsubscribe()))
})
