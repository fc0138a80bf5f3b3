import { Effect, Layer } from "effect"
import { Adjudicator } from "./Adjudicator.js"
import { Admission } from "./Admission.js"
import { adjudicateByRule } from "./RuleAdjudicator.js"
import { adjudicateWithPlugins, admitWithPlugins, pinsFor } from "../plugins/Pipeline.js"
import { PluginHost } from "../plugins/PluginHost.js"
import { PluginHostEnv } from "../plugins/HostEnv.js"

const ProposalStages = ["transform", "adjudicate", "witness_contract"] as const

/**
 * The kernel's policy seams. A policy that pins proposal-stage plugins is decided by the plugin
 * pipeline (the kernel keeps only the capability floor); a profile without plugins keeps its
 * built-in `rules` (amount thresholds), so small deployments and tests need no wasm.
 */
export const layerProfileSeams = Layer.effect(
  Adjudicator,
  Effect.gen(function* () {
    const ctx = yield* Effect.context<PluginHost | PluginHostEnv>()
    return Adjudicator.of({
      adjudicate: (input) =>
        ProposalStages.some((s) => pinsFor(input.policy, s).length > 0)
          ? adjudicateWithPlugins(input).pipe(Effect.provide(ctx))
          : Effect.succeed(adjudicateByRule(input))
    })
  })
).pipe(
  Layer.merge(
    Layer.effect(
      Admission,
      Effect.gen(function* () {
        const ctx = yield* Effect.context<PluginHost | PluginHostEnv>()
        return Admission.of({
          admit: (input) =>
            pinsFor(input.policy, "admit").length > 0 || pinsFor(input.policy, "observe").length > 0
              ? admitWithPlugins(input).pipe(Effect.provide(ctx))
              : Effect.succeed({ admitted: true as const, decisions: [] })
        })
      })
    )
  )
)
