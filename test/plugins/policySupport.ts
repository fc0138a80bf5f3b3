// Shared setup for the policy-plugin suites: one runtime over the compiled plugins/ wasm, and
// promise helpers so fast-check properties can drive the pipeline.
import { Effect, ManagedRuntime } from "effect"
import { Adjudicator, type Adjudication } from "../../runtime/policy/Adjudicator.js"
import { Admission, type AdmissionOutcome } from "../../runtime/policy/Admission.js"
import type { Decision } from "../../runtime/schema/Events.js"
import type { JsonObject, JsonValue } from "../../runtime/schema/Json.js"
import type { PluginPin } from "../../runtime/schema/PluginPin.js"
import { Now, pinOf, pipelineLayer, policyWith, proposal } from "./support.js"

/** spend-limit with no rules: ALLOW for every tool, the base the narrowing plugins narrow. */
export const baseAllow = (): PluginPin => pinOf("spend-limit", { config: { rules: {} } })

export interface HostData {
  readonly counters?: Readonly<Record<string, Readonly<Record<string, number>>>>
  readonly published?: Array<{ readonly subject: string; readonly data: string }>
}

/** A runtime over the plugin pipeline with the given host data; dispose it after the suite. */
export const pipelineRuntime = (data: HostData = {}) => {
  const runtime = ManagedRuntime.make(pipelineLayer(data))
  const adjudicate = (pins: ReadonlyArray<PluginPin>, tool: string, args: JsonObject = {}, extra: { readonly tools?: ReadonlyArray<string>; readonly disclosure?: "exact" | "redacted" } = {}): Promise<Adjudication> =>
    runtime.runPromise(
      Effect.flatMap(Adjudicator, (a) =>
        a.adjudicate({ proposal: proposal(tool, args), policy: policyWith(pins, extra.tools ?? [tool]), now: Now, ...(extra.disclosure !== undefined ? { disclosure: extra.disclosure } : {}) })
      )
    )
  const admit = (pins: ReadonlyArray<PluginPin>, tool: string, result: JsonValue, args: JsonValue = {}): Promise<AdmissionOutcome> =>
    runtime.runPromise(Effect.flatMap(Admission, (a) => a.admit({ principal: "alice", tool, args, result, policy: policyWith(pins, [tool]) })))
  return { runtime, adjudicate, admit, dispose: () => runtime.dispose() }
}

export const stageOf = (d: Decision): string => (d.output as { stage: string }).stage
export const resultOf = (d: Decision): unknown => (d.output as { result?: unknown }).result
export const faultOf = (d: Decision): string | undefined => (d.output as { fault?: string }).fault
