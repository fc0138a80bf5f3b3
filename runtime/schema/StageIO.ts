import { Schema } from "effect"
import { Reason } from "./Events.js"
import { JsonObject, JsonValue } from "./Json.js"
import { WitnessContract } from "./WitnessContract.js"

// The one definition of what each stage receives and returns (documented in plugin-sdk/README.md).
// Inputs are sent as RFC 8785 JSON; the sha256 of those exact bytes is the decision's input_digest.

/** The proposed call as plugins see it. */
export const ProposalIO = Schema.Struct({
  principal: Schema.String,
  session_id: Schema.String,
  turn_id: Schema.String,
  call_id: Schema.String,
  tool: Schema.String,
  args: JsonObject
})
export type ProposalIO = typeof ProposalIO.Type

const common = { config: JsonValue, now: Schema.Number }

export const TransformInput = Schema.Struct({ stage: Schema.Literal("transform"), proposal: ProposalIO, depth: Schema.Int, ...common })
export const AdjudicateInput = Schema.Struct({ stage: Schema.Literal("adjudicate"), proposal: ProposalIO, ...common })
/** What a witness may be shown: the exact arguments, or a summary with values redacted. */
export const Disclosure = Schema.Literal("exact", "redacted")
export type Disclosure = typeof Disclosure.Type

export const WitnessContractInput = Schema.Struct({
  stage: Schema.Literal("witness_contract"),
  proposal: ProposalIO,
  /** Why the adjudicators require a witness. */
  reasons: Schema.Array(Reason),
  /** The call's merged disclosure preference; absent when nobody set one. */
  disclosure: Schema.optional(Disclosure),
  ...common
})
export const AdmitInput = Schema.Struct({
  stage: Schema.Literal("admit"),
  principal: Schema.String,
  tool: Schema.String,
  args: JsonValue,
  result: JsonValue,
  ...common
})
/** Observers see what happened, never result bytes. */
export const ObserveInput = Schema.Struct({
  stage: Schema.Literal("observe"),
  event: Schema.Literal("adjudicated", "admitted", "quarantined"),
  principal: Schema.String,
  tool: Schema.String,
  args: JsonValue,
  verdict: Schema.String,
  reasons: Schema.Array(Reason),
  ...common
})

export const StageInput = Schema.Union(TransformInput, AdjudicateInput, WitnessContractInput, AdmitInput, ObserveInput)
export type StageInput = typeof StageInput.Type
export type TransformInput = typeof TransformInput.Type
export type AdjudicateInput = typeof AdjudicateInput.Type
export type WitnessContractInput = typeof WitnessContractInput.Type
export type AdmitInput = typeof AdmitInput.Type
export type ObserveInput = typeof ObserveInput.Type

const ToolName = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_.:-]{1,128}$/, { message: () => "a tool name is 1-128 chars of [A-Za-z0-9_.:-]" }))
const ReasonText = Schema.String.pipe(Schema.maxLength(2000))

/** Keep the call, replace it with another (re-adjudicated from the start), or reject it. */
export const TransformOutput = Schema.Union(
  Schema.Struct({ action: Schema.Literal("keep") }),
  Schema.Struct({
    action: Schema.Literal("replace"),
    tool: ToolName,
    args: JsonObject,
    reason: ReasonText,
    /** `canonicalize` for formatting-only rewrites (the caller's transform posture may auto-apply them). */
    kind: Schema.optional(Schema.Literal("canonicalize", "rewrite"))
  }),
  /** The call is denied with this reason (e.g. a path outside the workspace): nothing to canonicalize it to. */
  Schema.Struct({ action: Schema.Literal("reject"), reason: ReasonText })
)
export type TransformOutput = typeof TransformOutput.Type

export const AdjudicatorVerdict = Schema.Literal("ALLOW", "REQUIRE_WITNESS", "DENY", "DEFER")
export type AdjudicatorVerdict = typeof AdjudicatorVerdict.Type

export const AdjudicateOutput = Schema.Struct({
  verdict: AdjudicatorVerdict,
  reason: Schema.optional(ReasonText),
  /** Only read with REQUIRE_WITNESS. */
  contract: Schema.optional(WitnessContract)
})
export type AdjudicateOutput = typeof AdjudicateOutput.Type

/**
 * What the provider wants witnesses shown instead of the raw call: the disclosure it applied,
 * a summary, and the arguments (exact, or with values redacted).
 */
export const WitnessPresentation = Schema.Struct({
  disclosure: Disclosure,
  summary: Schema.optional(ReasonText),
  args: Schema.optional(JsonObject)
})
export type WitnessPresentation = typeof WitnessPresentation.Type

/** A contract to join with `all`, or null for no opinion; optionally how to present the call. */
export const WitnessContractOutput = Schema.Struct({
  contract: Schema.NullOr(WitnessContract),
  reason: Schema.optional(ReasonText),
  presentation: Schema.optional(WitnessPresentation)
})
export type WitnessContractOutput = typeof WitnessContractOutput.Type

export const AdmitVerdict = Schema.Literal("ADMIT", "QUARANTINE", "DEFER")
export type AdmitVerdict = typeof AdmitVerdict.Type
export const AdmitOutput = Schema.Struct({ verdict: AdmitVerdict, reason: Schema.optional(ReasonText) })
export type AdmitOutput = typeof AdmitOutput.Type

/** Observers answer `{}`; anything else is accepted and ignored, since observers never authorize. */
export const ObserveOutput = JsonValue

/** The output schema of each stage. */
export const StageOutputs = {
  transform: TransformOutput,
  adjudicate: AdjudicateOutput,
  witness_contract: WitnessContractOutput,
  admit: AdmitOutput,
  observe: ObserveOutput
} as const
