import { Effect, Layer } from "effect"
import { Adjudicator } from "../policy/Adjudicator.js"
import { Admission } from "../policy/Admission.js"
import { adjudicateByRule, builtInOpinions } from "../policy/RuleAdjudicator.js"
import { adjudicateWith, admitWith, pinsFor, pluginServices } from "./Pipeline.js"

const ProposalStages = ["transform", "adjudicate", "witness_contract"] as const

/**
 * The kernel's policy seams. Every layer's built-in `rules` always take part: a policy that pins
 * proposal-stage plugins folds them with the plugins' opinions (runtime/plugins/Pipeline.ts), and
 * one that pins none is decided by them alone, so small deployments and tests need no wasm.
 */
export const layerProfileSeams = Layer.effect(
  Adjudicator,
  Effect.gen(function* () {
    const plugins = yield* pluginServices
    return Adjudicator.of({
      adjudicate: (input) =>
        ProposalStages.some((s) => pinsFor(input.policy, s).length > 0)
          ? adjudicateWith(plugins, input, (call) => builtInOpinions(input.policy, call))
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
