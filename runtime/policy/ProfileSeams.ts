import { Effect, Layer } from "effect"
import { Adjudicator } from "./Adjudicator.js"
import { Admission } from "./Admission.js"
import { adjudicateByRule } from "./RuleAdjudicator.js"
import { adjudicateWith, admitWith, pinsFor, pluginServices } from "../plugins/Pipeline.js"

const ProposalStages = ["transform", "adjudicate", "witness_contract"] as const

/**
 * The kernel's policy seams. A policy that pins proposal-stage plugins is decided by the plugin
 * pipeline (the kernel keeps only the capability floor); a profile without plugins keeps its
 * built-in `rules` (amount thresholds), so small deployments and tests need no wasm.
 */
export const layerProfileSeams = Layer.effect(
  Adjudicator,
  Effect.gen(function* () {
    const plugins = yield* pluginServices
    return Adjudicator.of({
      adjudicate: (input) =>
        ProposalStages.some((s) => pinsFor(input.policy, s).length > 0)
          ? adjudicateWith(plugins, input)
          : Effect.succeed(adjudicateByRule(input))
    })
  })
).pipe(
  Layer.merge(
    Layer.effect(
      Admission,
      Effect.gen(function* () {
        const plugins = yield* pluginServices
        return Admission.of({
          admit: (input) =>
            pinsFor(input.policy, "admit").length > 0 || pinsFor(input.policy, "observe").length > 0
              ? admitWith(plugins, input)
              : Effect.succeed({ admitted: true as const, decisions: [] })
        })
      })
    )
  )
)
