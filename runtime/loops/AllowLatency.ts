import { Context, Effect, Layer, Ref } from "effect"
import { KernelConfig } from "../KernelConfig.js"
import { emptyLatencyLog, observed, paceStep, walkStarted, type LatencyLog, type PaceStep } from "../policy/ReevaluationPace.js"

/**
 * The ALLOW latency this kernel process serves (propose to reply, for proposals answered with the
 * tool's result), kept for the pace of the policy re-evaluation: replies served while no walk runs
 * make the idle baseline, replies served during a walk are what each step judges. Measured inside
 * the kernel, from the handler's start to its reply.
 */
export class AllowLatency extends Context.Tag("wk/AllowLatency")<
  AllowLatency,
  {
    /** One ALLOW reply took `ms`. */
    readonly record: (ms: number) => Effect.Effect<void>
    /** A walk starts (replies now count for it) or ends (they count for the baseline again). */
    readonly walking: (on: boolean) => Effect.Effect<void>
    /** The next rate of the walk from `rate` and the replies since the last step. */
    readonly step: (rate: number) => Effect.Effect<PaceStep>
  }
>() {}

export const layerAllowLatency = Layer.effect(
  AllowLatency,
  Effect.gen(function* () {
    const { reevaluation: pace } = yield* KernelConfig
    const clock = yield* Effect.clock
    const log = yield* Ref.make<LatencyLog>(emptyLatencyLog)
    // Walks of several shards may overlap in one process; the baseline waits for all to end.
    const walks = yield* Ref.make(0)
    return AllowLatency.of({
      record: (ms) => Effect.flatMap(Ref.get(walks), (n) => Ref.update(log, (l) => observed(pace, l, { at: clock.unsafeCurrentTimeMillis(), ms }, n > 0))),
      walking: (on) =>
        Effect.flatMap(
          Ref.updateAndGet(walks, (n) => Math.max(0, n + (on ? 1 : -1))),
          (n) => (on && n === 1 ? Ref.update(log, walkStarted) : Effect.void)
        ),
      step: (rate) => Ref.modify(log, (l) => {
        const s = paceStep(pace, rate, l, clock.unsafeCurrentTimeMillis())
        return [s, s.log]
      })
    })
  })
)
