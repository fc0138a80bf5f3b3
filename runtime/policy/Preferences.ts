import type { Decision, Reason } from "../schema/Events.js"
import type { JsonObject, JsonValue } from "../schema/Json.js"
import type { Preferences, TransformPosture } from "../schema/Preferences.js"
import type { WitnessContract, WitnessRule } from "../schema/WitnessContract.js"
import type { ActivePolicy } from "./ActivePolicy.js"
import type { Adjudication } from "./Adjudicator.js"
import { DefaultContract } from "./RuleAdjudicator.js"
import type { WitnessRegistry } from "../heldcall/Counting.js"
import { choosePolicyRoute, type RouteCaller } from "../heldcall/PolicyRoute.js"

/**
 * Preferences shape how gates are experienced; they never widen authority. Profiles set them
 * per principal (`preferences: {"agent:bob": {...}, "*": {...}}`) and a proposer per call;
 * merging keeps the stricter choice, and a per-call choice looser than its layers is refused.
 * Pure: no I/O, so the merge can be property-tested and replayed.
 */

/** A per-call preference that would loosen what a layer set: the field and why. */
export interface PreferenceWidening {
  readonly field: string
  readonly message: string
}

type Strictness<A> = ReadonlyArray<A>
// Each list runs from loosest to strictest.
const PostureOrder: Strictness<string> = ["auto", "preview"]
const SubstitutionOrder: Strictness<string> = ["allow", "preview", "forbid"]
const DisclosureOrder: Strictness<string> = ["exact", "redacted"]

const stricterOf = <A extends string>(order: Strictness<string>, a: A | undefined, b: A | undefined): A | undefined =>
  a === undefined ? b : b === undefined ? a : order.indexOf(a) >= order.indexOf(b) ? a : b

const looser = (order: Strictness<string>, call: string | undefined, layer: string | undefined): boolean =>
  call !== undefined && layer !== undefined && order.indexOf(call) < order.indexOf(layer)

const mergePosture = (a: TransformPosture | undefined, b: TransformPosture | undefined): TransformPosture | undefined => {
  if (a === undefined || b === undefined) return a ?? b
  const canonicalize = stricterOf(PostureOrder, a.canonicalize, b.canonicalize)
  const rewrite = stricterOf(PostureOrder, a.rewrite, b.rewrite)
  const substitution = stricterOf(SubstitutionOrder, a.substitution, b.substitution)
  return { ...(canonicalize ? { canonicalize } : {}), ...(rewrite ? { rewrite } : {}), ...(substitution ? { substitution } : {}) }
}

const minDefined = (a: number | undefined, b: number | undefined): number | undefined => (a === undefined ? b : b === undefined ? a : Math.min(a, b))

/**
 * The stricter of two preference sets, field by field. Commutative, associative and
 * idempotent (property-tested), so the order layers are listed in never matters. `wait` is
 * latency, not authority: the later set's choice stands.
 */
export const mergePreferences = (a: Preferences, b: Preferences): Preferences => {
  const always = [...new Set([...(a.always_witness ?? []), ...(b.always_witness ?? [])])].sort()
  const route: WitnessRule | undefined = a.witness_route && b.witness_route ? joinRoutes(a.witness_route, b.witness_route) : (a.witness_route ?? b.witness_route)
  const transforms = mergePosture(a.transforms, b.transforms)
  const disclosure = stricterOf(DisclosureOrder, a.disclosure, b.disclosure)
  const expires = minDefined(a.expires_in_ms, b.expires_in_ms)
  const wait = b.wait ?? a.wait
  return {
    ...(a.require_witness === true || b.require_witness === true ? { require_witness: true } : {}),
    ...(always.length > 0 ? { always_witness: always } : {}),
    ...(route !== undefined ? { witness_route: route } : {}),
    ...(expires !== undefined ? { expires_in_ms: expires } : {}),
    ...(wait !== undefined ? { wait } : {}),
    ...(a.cancel_on_disconnect === true || b.cancel_on_disconnect === true ? { cancel_on_disconnect: true } : {}),
    ...(transforms !== undefined ? { transforms } : {}),
    ...(disclosure !== undefined ? { disclosure } : {})
  }
}

// Two routes both have to be satisfied; joining is sorted so the merge stays commutative.
const joinRoutes = (a: WitnessRule, b: WitnessRule): WitnessRule => {
  const parts = [...("all" in a ? a.all : [a]), ...("all" in b ? b.all : [b])]
  const unique = [...new Map(parts.map((r) => [JSON.stringify(r), r])).entries()].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)).map(([, r]) => r)
  return unique.length === 1 ? unique[0]! : { all: unique }
}

/** Where a layer's preferences came from, for errors and `wk profile explain`. */
export interface LayerPreferences {
  readonly preferences: Preferences
  /** Profile names, in the order merged. */
  readonly from: ReadonlyArray<string>
}

const cache = new WeakMap<ActivePolicy, Map<string, LayerPreferences>>()

/** The merged preferences every profile in force sets for a principal (its own entry and "*"). */
export const layerPreferences = (policy: ActivePolicy, principal: string): LayerPreferences => {
  let perPrincipal = cache.get(policy)
  if (perPrincipal === undefined) cache.set(policy, (perPrincipal = new Map()))
  const hit = perPrincipal.get(principal)
  if (hit !== undefined) return hit
  let preferences: Preferences = {}
  const from: Array<string> = []
  for (const profile of policy.profiles) {
    const table = profile.preferences
    if (table === undefined) continue
    for (const key of ["*", principal]) {
      const p = table[key]
      if (p === undefined) continue
      preferences = mergePreferences(preferences, p)
      if (!from.includes(profile.name)) from.push(profile.name)
    }
  }
  const result = { preferences, from }
  perPrincipal.set(principal, result)
  return result
}

/**
 * Every field where a per-call preference is looser than the layers in force. Per-call
 * preferences may only narrow (or cancel): these are refused with 400, naming the field.
 */
export const wideningsOf = (call: Preferences, layer: LayerPreferences): ReadonlyArray<PreferenceWidening> => {
  const l = layer.preferences
  const by = layer.from.length > 0 ? ` set by profile ${layer.from.map((n) => `'${n}'`).join(", ")}` : ""
  const out: Array<PreferenceWidening> = []
  const refuse = (field: string, what: string) => out.push({ field, message: `${what}${by}; a per-call preference can only narrow` })
  if (call.require_witness === false && l.require_witness === true) refuse("require_witness", "require_witness false would drop the witness the user layer requires")
  if (call.cancel_on_disconnect === false && l.cancel_on_disconnect === true) refuse("cancel_on_disconnect", "cancel_on_disconnect false would keep a call the user layer cancels on disconnect")
  if (call.expires_in_ms !== undefined && l.expires_in_ms !== undefined && call.expires_in_ms > l.expires_in_ms) refuse("expires_in_ms", `expires_in_ms ${call.expires_in_ms} is longer than the layer's ${l.expires_in_ms}`)
  if (looser(DisclosureOrder, call.disclosure, l.disclosure)) refuse("disclosure", `disclosure '${call.disclosure}' discloses more than the layer's '${l.disclosure}'`)
  for (const f of ["canonicalize", "rewrite"] as const) {
    if (looser(PostureOrder, call.transforms?.[f], l.transforms?.[f])) refuse(`transforms.${f}`, `transforms.${f} '${call.transforms?.[f]}' is looser than the layer's '${l.transforms?.[f]}'`)
  }
  if (looser(SubstitutionOrder, call.transforms?.substitution, l.transforms?.substitution)) {
    refuse("transforms.substitution", `transforms.substitution '${call.transforms?.substitution}' is looser than the layer's '${l.transforms?.substitution}'`)
  }
  return out
}

/** The preferences in force for one call: its layers merged with its own (already checked). */
export const effectivePreferences = (policy: ActivePolicy, principal: string, call: Preferences | undefined): Preferences => {
  const { wait: _layerWait, ...layer } = layerPreferences(policy, principal).preferences
  // `wait` is per call only: how a result is answered is recorded with the call it changes.
  return call === undefined ? layer : mergePreferences(layer, call)
}

/** Does a tool name match a pattern (`money_transfer`, or a prefix `fs_write*`)? */
export const toolMatches = (pattern: string, tool: string): boolean => (pattern.endsWith("*") ? tool.startsWith(pattern.slice(0, -1)) : pattern === tool)

/** One replacement a transform made, as the decisions record it. */
export interface Replacement {
  readonly by: string
  readonly from: string
  readonly to: string
  readonly kind: "canonicalize" | "rewrite" | "substitution"
}

const isObject = (v: JsonValue | undefined): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v)

/**
 * The replacements in an adjudication's decision records, in the order they applied. Each
 * replaces the call the one before it produced, the first the proposal of `proposedTool` (the
 * records hold each transform's result, not a copy of its input).
 */
export const replacementsOf = (decisions: ReadonlyArray<Decision>, proposedTool: string): ReadonlyArray<Replacement> => {
  const out: Array<Replacement> = []
  let from = proposedTool
  for (const d of decisions) {
    const o = d.output
    if (!isObject(o) || o["stage"] !== "transform" || !isObject(o["result"]) || o["result"]["action"] !== "replace") continue
    const to = String(o["result"]["tool"])
    const kind = from !== to ? "substitution" : o["result"]["kind"] === "canonicalize" ? "canonicalize" : "rewrite"
    out.push({ by: d.by, from, to, kind })
    from = to
  }
  return out
}

const PreferenceBy = "preferences"

const hold = (a: Adjudication, reasons: ReadonlyArray<Reason>, contract: WitnessContract): Adjudication => ({
  ...a,
  verdict: "REQUIRE_WITNESS",
  contract,
  reasons: [...a.reasons, ...reasons],
  decisions: [...a.decisions, { by: PreferenceBy, output: "REQUIRE_WITNESS" }]
})

/**
 * Applies the preferences in force to a folded adjudication. Only narrows: DENY stays DENY; a
 * forbidden substitution denies; a previewed replacement or a call in the witness scope is
 * held (one human approval, from the preferred route when one is set, when policy itself did not hold it).
 */
export const applyPreferences = (
  a: Adjudication,
  prefs: Preferences,
  proposed: { readonly tool: string } & Partial<RouteCaller>,
  registry?: WitnessRegistry
): Adjudication => {
  if (a.verdict === "DENY") return a
  const replacements = replacementsOf(a.decisions, proposed.tool)
  const posture = prefs.transforms
  const forbidden = replacements.find((r) => r.kind === "substitution" && posture?.substitution === "forbid")
  if (forbidden !== undefined) {
    const { contract: _held, ...rest } = a
    return {
      ...rest,
      verdict: "DENY",
      reasons: [...a.reasons, { by: PreferenceBy, reason: `tool substitution is forbidden: ${forbidden.by} replaced ${forbidden.from} with ${forbidden.to}` }],
      decisions: [...a.decisions, { by: PreferenceBy, output: "DENY" }]
    }
  }
  if (a.verdict === "REQUIRE_WITNESS") return routedPolicyHold(a, prefs, proposed, registry)
  const why: Array<Reason> = []
  const previewed = replacements.find((r) =>
    r.kind === "substitution" ? posture?.substitution === "preview" : (posture?.[r.kind] ?? "auto") === "preview"
  )
  if (previewed !== undefined) why.push({ by: PreferenceBy, reason: `preview before running: ${previewed.by} replaced ${previewed.from} (${previewed.kind})` })
  if (prefs.require_witness === true) why.push({ by: PreferenceBy, reason: "the caller asked for a witness" })
  const scoped = (prefs.always_witness ?? []).find((p) => toolMatches(p, proposed.tool) || toolMatches(p, a.executed.tool))
  if (scoped !== undefined) why.push({ by: PreferenceBy, reason: `calls matching '${scoped}' always need a witness` })
  if (why.length === 0) return a
  // A route picks among the witnesses the contract admits; it never replaces the contract's rule.
  const contract: WitnessContract = prefs.witness_route !== undefined ? { ...DefaultContract, route: prefs.witness_route, summary: `${DefaultContract.summary}, from the witness route the preferences name` } : DefaultContract
  return hold(a, why, contract)
}

/**
 * A policy hold with the user's `witness_route` applied where the witnesses it admits can meet
 * the contract alone (runtime/heldcall/PolicyRoute.ts); otherwise the contract stands and the
 * reason the route was ignored is recorded with the decision. Without a registry (or a caller)
 * the route cannot be judged and is left out.
 */
const routedPolicyHold = (a: Adjudication, prefs: Preferences, caller: Partial<RouteCaller>, registry: WitnessRegistry | undefined): Adjudication => {
  const route = prefs.witness_route
  if (route === undefined || a.contract === undefined || a.contract.route !== undefined) return a
  if (registry === undefined || caller.principal === undefined || caller.session_id === undefined) return a
  const choice = choosePolicyRoute(a.contract, route, registry, { principal: caller.principal, session_id: caller.session_id })
  const reasons = [...a.reasons, { by: PreferenceBy, reason: choice.reason }]
  return choice.applied ? { ...a, reasons, contract: { ...a.contract, route } } : { ...a, reasons }
}

/** Every argument value replaced by its JSON type: what a `redacted` witness is shown. */
export const redactArgs = (args: JsonObject): JsonObject => {
  const out: Record<string, JsonValue> = {}
  for (const [k, v] of Object.entries(args)) out[k] = `[redacted ${v === null ? "null" : Array.isArray(v) ? "array" : typeof v}]`
  return out
}
