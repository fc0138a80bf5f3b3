import { canonicalize, sha256Hex } from "../schema/Canonical.js"
import type { Decision } from "../schema/Events.js"
import type { JsonObject, JsonValue } from "../schema/Json.js"

// The JCS text of the transform and adjudicate stage inputs (StageIO.ts), built from parts each
// canonicalized once: the call's arguments once per call, a pin's config once per pin. The same
// builder serves the kernel (the bytes the plugin reads, their sha256 the decision's input_digest)
// and the auditor (who re-derives the input the record does not copy), so both hash the same text.
// RFC 8785 orders object keys by UTF-16 code units; the literal key order below is that order.

/** The proposed call's fields every stage input's `proposal` carries, but for the call (tool, args) the transforms may replace. */
export interface ProposalIds {
  readonly principal: string
  readonly session_id: string
  readonly turn_id: string
  readonly call_id: string
}

/** One call (tool and arguments) with its arguments' JCS text, computed once. */
export interface CanonicalCall {
  readonly tool: string
  readonly args: JsonObject
  readonly argsText: string
}

/** `{tool, args}` with the JCS text of `args` computed now (once per call). */
export const canonicalCall = (tool: string, args: JsonObject): CanonicalCall => ({ tool, args, argsText: canonicalize(args) })

const str = JSON.stringify

/** The JCS text of `proposal` (ProposalIO) for `call`. */
export const proposalText = (ids: ProposalIds, call: CanonicalCall): string =>
  `{"args":${call.argsText},"call_id":${str(ids.call_id)},"principal":${str(ids.principal)},"session_id":${str(ids.session_id)},"tool":${str(call.tool)},"turn_id":${str(ids.turn_id)}}`

/** The JCS text of `{tool, args}`: its sha256 is the call digest. */
export const callText = (call: CanonicalCall): string => `{"args":${call.argsText},"tool":${str(call.tool)}}`

// Integers (the clock in ms, the depth) are written as JCS writes them; anything else goes through canonicalize.
const num = (n: number): string => (Number.isSafeInteger(n) ? String(n) : canonicalize(n))

const configTexts = new WeakMap<object, string>()
/** The JCS text of a pin's config, once per config object (a resolved pin's config is never changed). */
export const configText = (config: JsonValue): string => {
  if (typeof config !== "object" || config === null) return canonicalize(config)
  let text = configTexts.get(config)
  if (text === undefined) configTexts.set(config, (text = canonicalize(config)))
  return text
}

/** The JCS text of a transform stage's input (TransformInput). */
export const transformInputText = (proposal: string, depth: number, config: string, now: number): string =>
  `{"config":${config},"depth":${num(depth)},"now":${num(now)},"proposal":${proposal},"stage":"transform"}`

/** The JCS text of an adjudicate stage's input (AdjudicateInput). */
export const adjudicateInputText = (proposal: string, config: string, now: number): string =>
  `{"config":${config},"now":${num(now)},"proposal":${proposal},"stage":"adjudicate"}`

/**
 * What one recorded decision of an adjudication was given, re-derived from the generation's
 * proposal and the decisions before it (`call.adjudicated` records transform and adjudicate
 * decisions with their input digest, not a copy of the input):
 * - `derived`: the input's JCS text, given the adjudication's clock (`now` is not recorded: the
 *   auditor finds it from the input digest, searching back from the event's time);
 * - `not_in_scope`: the pin was not run; `tool` is the call it was not run for;
 * - `recorded`: the record carries its input (witness_contract, observe) or is no plugin's.
 */
export type DerivedInput =
  | { readonly kind: "derived"; readonly text: (now: number) => string }
  | { readonly kind: "not_in_scope"; readonly tool: string }
  | { readonly kind: "recorded" }

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/**
 * Walks an adjudication's decisions in order, as the pipeline ran them: a transform's
 * replacement becomes the call the following stages see, one deeper (the transforms restart).
 * `configOf` gives the pin config a decision was made under (undefined: unknown, nothing derived).
 */
export const deriveAdjudicationInputs = (
  ids: ProposalIds,
  proposed: { readonly tool: string; readonly args: JsonObject },
  decisions: ReadonlyArray<Decision>,
  configOf: (d: Decision) => JsonValue | undefined
): ReadonlyArray<DerivedInput> => {
  let call = canonicalCall(proposed.tool, proposed.args)
  let proposal = proposalText(ids, call)
  let depth = 0
  return decisions.map((d): DerivedInput => {
    const out = d.output
    if (!isObject(out) || typeof out["stage"] !== "string") return { kind: "recorded" }
    if (out["scope"] === "not_in_scope") return { kind: "not_in_scope", tool: call.tool }
    const stage = out["stage"]
    const config = configOf(d)
    let derived: DerivedInput = { kind: "recorded" }
    if (out["input"] === undefined && config !== undefined && (stage === "transform" || stage === "adjudicate")) {
      const [p, c, k] = [proposal, configText(config), depth]
      derived = { kind: "derived", text: stage === "transform" ? (now) => transformInputText(p, k, c, now) : (now) => adjudicateInputText(p, c, now) }
    }
    const result = out["result"]
    if (stage === "transform" && isObject(result) && result["action"] === "replace" && typeof result["tool"] === "string" && isObject(result["args"])) {
      call = canonicalCall(result["tool"], result["args"] as JsonObject)
      proposal = proposalText(ids, call)
      depth++
    }
    return derived
  })
}

/**
 * The adjudication clock an input was built with: the first `now` from `from` back to
 * `from - windowMs` whose input text hashes to `digest` (the kernel reads its clock before the
 * plugins run and stamps the event after). Undefined when none does.
 */
export const findClock = (text: (now: number) => string, digest: string, from: number, windowMs: number): number | undefined => {
  for (let now = from; now >= from - windowMs; now--) if (sha256Hex(text(now)) === digest) return now
  return undefined
}
