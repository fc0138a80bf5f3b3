import { Clock, type Context, Effect, Either, Layer, Schema } from "effect"
import { kernelMetrics } from "../observability/KernelMetrics.js"
import { startChildSpan, tracingEnabled } from "../observability/Tracing.js"
import { SpanStatusCode } from "@opentelemetry/api"
import { isNarrowingPin, type ActivePolicy } from "../policy/ActivePolicy.js"
import { floorRefusal } from "../policy/KernelFloor.js"
import { Adjudicator, type Adjudication, type AdjudicationInput } from "../policy/Adjudicator.js"
import { Admission, type AdmissionInput, type AdmissionOutcome } from "../policy/Admission.js"
import { sha256Hex } from "../schema/Canonical.js"
import type { Decision, Reason, Verdict } from "../schema/Events.js"
import type { JsonObject, JsonValue } from "../schema/Json.js"
import type { WitnessContract } from "../schema/WitnessContract.js"
import { DefaultContract, decide, foldAdmission, foldOpinions, type AdmitOpinion, type Offer, type Opinion } from "../policy/Fold.js"
import { grantedHostHandler, PluginHostEnv, type HostValue } from "./HostEnv.js"
import type { Stage } from "../schema/PluginManifest.js"
import { layerPluginHost, PluginHost, type Invocation, type LoadedPlugin } from "./PluginHost.js"
import type { PluginSource } from "./PluginSource.js"
import type { PluginLoadError } from "./PluginError.js"
import { pinAppliesTo, pinIdentity, pinLabel, resolvePin, type PluginPin } from "../schema/PluginPin.js"
import { adjudicateInputText, callText, canonicalCall, configText, proposalText, transformInputText, type CanonicalCall } from "./StageInputs.js"
import { AdjudicateOutput, AdmitOutput, TransformOutput, WitnessContractOutput, type ProposalIO, type WitnessPresentation } from "../schema/StageIO.js"

/** Transforms may chain at most this many times before the call is denied. */
export const MaxTransformDepth = 4

/** Every pin in the policy granted `stage`, deduplicated, in (precedence, name, version, digest) order. */
export const pinsFor = (policy: ActivePolicy, stage: Stage): ReadonlyArray<PluginPin> => {
  let perStage = pinCache.get(policy)
  if (perStage === undefined) pinCache.set(policy, (perStage = new Map()))
  const hit = perStage.get(stage)
  if (hit !== undefined) return hit
  const pins = computePins(policy, stage)
  perStage.set(stage, pins)
  return pins
}
// An ActivePolicy is immutable: its ordered pins per stage are computed once.
const pinCache = new WeakMap<ActivePolicy, Map<Stage, ReadonlyArray<PluginPin>>>()

const computePins = (policy: ActivePolicy, stage: Stage): ReadonlyArray<PluginPin> => {
  const byKey = new Map<string, PluginPin>()
  for (const profile of policy.profiles) for (const pin of profile.plugins ?? []) if (pin.stages.includes(stage)) byKey.set(pinIdentity(pin), pin)
  return [...byKey.values()].sort((a, b) => {
    const ra = resolvePin(a), rb = resolvePin(b)
    return ra.precedence - rb.precedence || cmp(a.name, b.name) || cmp(a.version, b.version) || cmp(a.sha256, b.sha256) || cmp(pinIdentity(a), pinIdentity(b))
  })
}
const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)

/** How a plugin call ended, after decoding its output. */
export type StageResult<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly fault: string; readonly message: string }

/** `plugin:name@version`, the `by` of a plugin's decisions and reasons. */
export const pluginBy = (pin: { readonly name: string; readonly version: string }): string => `plugin:${pinLabel(pin)}`

/** The decision record of one plugin call: digest, input digest, output (or fault and fallback), host values. */
export const pluginDecision = (
  pin: PluginPin,
  stage: Stage,
  inv: Invocation | undefined,
  body: { readonly result: JsonValue } | { readonly fault: string; readonly message: string; readonly fallback: string }
): Decision => ({
  by: pluginBy(pin),
  digest: pin.sha256,
  ...(inv !== undefined ? { input_digest: inv.inputDigest } : {}),
  output: {
    stage,
    // The input is copied only where the log cannot re-derive it: admission inputs carry the tool
    // result (the auditor rebuilds them from effect.recorded); transform and adjudicate inputs are
    // the proposal, the pin's config and the clock (StageInputs.ts `deriveAdjudicationInputs`).
    ...(inv !== undefined && recordsInput(stage) ? { input: inv.input } : {}),
    ...body
  },
  ...(inv !== undefined && inv.hostValues.length > 0 ? { host_values: inv.hostValues.map(hostValueJson) } : {})
})

/** Stages whose decision record carries a copy of its input: those the log cannot re-derive it for. */
export const recordsInput = (stage: Stage): boolean => stage === "witness_contract" || stage === "observe"

/**
 * The record of a pin's stage that was not run because the pin does not apply to the call's tool
 * (`PluginPin.tools`): `{by, digest, output: {stage, scope: "not_in_scope", tool}}`. No input
 * digest, no result: the plugin was not called. The auditor checks it against the pin's scope.
 */
export const notInScopeDecision = (pin: PluginPin, stage: Stage, tool: string): Decision => ({
  by: pluginBy(pin),
  digest: pin.sha256,
  output: { stage, scope: NotInScope, tool }
})

/** The `scope` of a not-in-scope record's output. */
export const NotInScope = "not_in_scope"

const hostValueJson = (h: HostValue): JsonValue => ({ fn: h.fn, arg: h.arg, ...(h.fault !== undefined ? { fault: h.fault } : { value: h.value ?? null }) })

type Call<A> = { readonly result: StageResult<A>; readonly inv: Invocation | undefined }

/** The services the pipeline runs on, taken once (a seam built from them provides nothing per call). */
export interface Plugins {
  readonly host: Context.Tag.Service<typeof PluginHost>
  readonly env: Context.Tag.Service<typeof PluginHostEnv>
}

export const pluginServices: Effect.Effect<Plugins, never, PluginHost | PluginHostEnv> = Effect.all({ host: PluginHost, env: PluginHostEnv })

/**
 * Loads and calls one plugin for one stage and decodes its output. A load refusal, a fault or
 * an output that fails decoding all come back as `ok: false` (the caller takes the fallback).
 */
const callStage = <A, I>(
  plugins: Plugins,
  pin: PluginPin,
  stage: Stage,
  schema: Schema.Schema<A, I>,
  input: JsonValue,
  call: { readonly principal: string; readonly now: number },
  text?: string
): Effect.Effect<Call<A>> => Effect.flatten(startStage(plugins, pin, stage, schema, input, call, text))

/**
 * `callStage` in two steps: the outer effect loads the plugin and hands the call to its
 * worker; the inner one awaits and decodes the outcome.
 */
const startStage = <A, I>(
  plugins: Plugins,
  pin: PluginPin,
  stage: Stage,
  schema: Schema.Schema<A, I>,
  input: JsonValue,
  call: { readonly principal: string; readonly now: number },
  text?: string
): Effect.Effect<Effect.Effect<Call<A>>> =>
  // Plain combinators, not a generator: this runs for every plugin call of every proposal.
  Effect.matchEffect(plugins.host.load(pin), {
    onFailure: (e) => Effect.succeed(Effect.succeed<Call<A>>({ result: loadFault(e), inv: undefined })),
    onSuccess: (plugin) => {
      const started = Effect.map(plugins.host.start(plugin, stage, input, grantedHostHandler(plugin.pin, call, plugins.env), text), (running) =>
        Effect.flatMap(running, (inv) => {
          kernelMetrics.pluginSeconds.observe({ plugin: plugin.pin.name, plugin_version: plugin.pin.version, stage, status: inv.raw.status }, inv.raw.elapsedMs / 1000)
          if (inv.raw.fuel !== undefined) kernelMetrics.pluginFuel.observe({ plugin: plugin.pin.name, plugin_version: plugin.pin.version, stage }, inv.raw.fuel)
          const outcome: Call<A> = inv.raw.status !== "ok" ? { result: { ok: false, fault: inv.raw.status, message: inv.raw.text }, inv } : { result: decodeOutput(stage, schema, inv.raw.text), inv }
          if (inv.raw.logs.length === 0) return Effect.succeed(outcome)
          return Effect.as(Effect.forEach(inv.raw.logs, (line) => Effect.logInfo(line).pipe(Effect.annotateLogs({ plugin: plugin.label, stage })), { discard: true }), outcome)
        })
      )
      return tracingEnabled() ? tracedStage(plugin.label, stage, started) : started
    }
  })

/** Traced, a plugin call is a `wk.plugin` span from its hand-off to its decoded outcome. */
const tracedStage = <A>(plugin: string, stage: Stage, started: Effect.Effect<Effect.Effect<Call<A>>>): Effect.Effect<Effect.Effect<Call<A>>> =>
  Effect.flatMap(startChildSpan(`wk.plugin ${plugin}`, { "wk.plugin": plugin, "wk.stage": stage }), (span) =>
    Effect.map(started, (awaited) =>
      Effect.tap(awaited, (outcome) =>
        Effect.sync(() => {
          if (span === undefined) return
          span.setAttribute("wk.plugin.status", outcome.inv?.raw.status ?? "load")
          if (outcome.inv !== undefined) span.setAttribute("wk.plugin.elapsed_ms", outcome.inv.raw.elapsedMs)
          if (!outcome.result.ok) span.setStatus({ code: SpanStatusCode.ERROR, message: `${outcome.result.fault}: ${outcome.result.message.slice(0, 200)}` })
          span.end()
        })
      )
    )
  )

const loadFault = (e: PluginLoadError): StageResult<never> => ({ ok: false, fault: "load", message: e.message })

const decodeOutput = <A, I>(stage: Stage, schema: Schema.Schema<A, I>, text: string): StageResult<A> => {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return { ok: false, fault: "bad_output", message: `output is not JSON: ${JSON.stringify(text.slice(0, 200))}` }
  }
  const r = Schema.decodeUnknownEither(schema)(parsed, { onExcessProperty: "error" })
  return Either.isRight(r) ? { ok: true, value: r.right } : { ok: false, fault: "bad_output", message: `output does not match the ${stage} output schema: ${r.left.message.slice(0, 500)}` }
}

const faultReason = (pin: PluginPin, r: { readonly fault: string; readonly message: string }, fallback: string): Reason => ({
  by: pluginBy(pin),
  reason: `plugin fault (${r.fault}): ${r.message.slice(0, 300)}; fallback ${fallback}`
})

const proposalOf = (p: AdjudicationInput["proposal"], current: { readonly tool: string; readonly args: JsonObject }): ProposalIO => ({
  principal: p.principal,
  session_id: p.session_id,
  turn_id: p.turn_id,
  call_id: p.call_id,
  tool: current.tool,
  args: current.args
})

/**
 * The adjudication pipeline: transforms (each replacement restarts from the first transform),
 * then every adjudicator (folded), then witness-contract providers when a witness is needed,
 * then observers. The kernel's grant floor ran before this; replacements are checked again here.
 */
export const adjudicateWithPlugins = (input: AdjudicationInput): Effect.Effect<Adjudication, never, PluginHost | PluginHostEnv> =>
  Effect.flatMap(pluginServices, (plugins) => adjudicateWith(plugins, input))

/**
 * `adjudicateWithPlugins` over services already in hand (the seams: no per-call provide).
 * `builtIn` gives the kernel's own opinions on the call after transforms (the profile rules),
 * folded with the plugins'.
 */
export const adjudicateWith = (
  plugins: Plugins,
  input: AdjudicationInput,
  builtIn: (call: { readonly tool: string; readonly args: JsonObject }) => ReadonlyArray<Opinion> = () => []
): Effect.Effect<Adjudication> =>
  Effect.gen(function* () {
    const { proposal, policy, now } = input
    const ctx = { principal: proposal.principal, now }
    const decisions: Decision[] = []
    // The call's arguments are canonicalized once; every stage input is built from that text.
    let current: CanonicalCall = canonicalCall(proposal.tool, proposal.args)
    let currentText = proposalText(proposal, current)
    const transforms = pinsFor(policy, "transform")
    // Digests of every call in the transform chain (only needed when there are transforms).
    const seen = new Set(transforms.length > 0 ? [sha256Hex(callText(current))] : [])
    let depth = 0

    let presentation: WitnessPresentation | undefined
    const finish = (verdict: Verdict, reasons: ReadonlyArray<Reason>, contract?: WitnessContract) =>
      observe(plugins, policy, { event: "adjudicated", principal: proposal.principal, tool: current.tool, args: current.args, verdict, reasons }, now, decisions).pipe(
        Effect.as<Adjudication>({
          verdict,
          reasons,
          ...(contract !== undefined ? { contract } : {}),
          decisions,
          executed: { tool: current.tool, args: current.args },
          ...(verdict === "REQUIRE_WITNESS" && presentation !== undefined ? { presentation } : {})
        })
      )
    const failClosed = (fallback: "DENY" | "REQUIRE_WITNESS", reason: Reason) =>
      fallback === "DENY" ? finish("DENY", [reason]) : finish("REQUIRE_WITNESS", [reason], DefaultContract)

    restart: for (;;) {
      for (const pin of transforms) {
        if (!pinAppliesTo(pin, current.tool)) {
          decisions.push(notInScopeDecision(pin, "transform", current.tool))
          continue
        }
        const text = transformInputText(currentText, depth, configText(resolvePin(pin).config), now)
        const { result, inv } = yield* callStage(plugins, pin, "transform", TransformOutput, null, ctx, text)
        if (!result.ok) {
          const fallback = resolvePin(pin).fallback
          decisions.push(pluginDecision(pin, "transform", inv, { fault: result.fault, message: result.message, fallback }))
          return yield* failClosed(fallback, faultReason(pin, result, fallback))
        }
        decisions.push(pluginDecision(pin, "transform", inv, { result: result.value }))
        if (result.value.action === "keep") continue
        const by = pluginBy(pin)
        if (result.value.action === "reject") return yield* finish("DENY", [{ by, reason: result.value.reason }])
        const next = canonicalCall(result.value.tool, result.value.args)
        const nextDigest = sha256Hex(callText(next))
        if (seen.has(nextDigest)) return yield* finish("DENY", [{ by, reason: `transform loop: ${next.tool} was already proposed in this chain` }])
        if (++depth > MaxTransformDepth) return yield* finish("DENY", [{ by, reason: `transform depth over the bound of ${MaxTransformDepth}` }])
        // A transform never inherits authority: the replacement passes the kernel floor itself
        // (grants, and no kernel tool), then every transform and adjudicator from the start.
        const refused = floorRefusal(policy, proposal.principal, next.tool)
        if (refused !== undefined) return yield* finish("DENY", [{ by, reason: `transform to ${next.tool} refused: ${refused}` }])
        seen.add(nextDigest)
        current = next
        currentText = proposalText(proposal, current)
        continue restart
      }
      break
    }

    const opinions: Opinion[] = [...builtIn({ tool: current.tool, args: current.args })]
    for (const o of opinions) decisions.push({ by: o.by, output: o.verdict })
    // Adjudicators are independent opinions on the same call: each is handed to its worker
    // before any is awaited, so they run side by side; they are folded in pin order.
    const adjudicators = pinsFor(policy, "adjudicate")
    const running: Array<Effect.Effect<Call<typeof AdjudicateOutput.Type>> | undefined> = []
    for (const pin of adjudicators) {
      if (!pinAppliesTo(pin, current.tool)) {
        running.push(undefined)
        continue
      }
      const text = adjudicateInputText(currentText, configText(resolvePin(pin).config), now)
      running.push(yield* startStage(plugins, pin, "adjudicate", AdjudicateOutput, null, ctx, text))
    }
    for (let i = 0; i < adjudicators.length; i++) {
      const pin = adjudicators[i]!
      const started = running[i]
      if (started === undefined) {
        decisions.push(notInScopeDecision(pin, "adjudicate", current.tool))
        continue
      }
      const role = isNarrowingPin(policy, pin) ? ("narrowing" as const) : ("authority" as const)
      const { result, inv } = yield* started
      if (result.ok) {
        decisions.push(pluginDecision(pin, "adjudicate", inv, { result: result.value }))
        opinions.push({ by: pluginBy(pin), ...result.value, role })
      } else {
        const fallback = resolvePin(pin).fallback
        decisions.push(pluginDecision(pin, "adjudicate", inv, { fault: result.fault, message: result.message, fallback }))
        opinions.push({ by: pluginBy(pin), verdict: fallback, reason: faultReason(pin, result, fallback).reason, role })
      }
    }
    const folded = foldOpinions(opinions)
    const first = decide(folded)
    if (first.verdict !== "REQUIRE_WITNESS") return yield* finish(first.verdict, first.reasons)

    const offered: Offer[] = []
    for (const pin of pinsFor(policy, "witness_contract")) {
      if (!pinAppliesTo(pin, current.tool)) {
        decisions.push(notInScopeDecision(pin, "witness_contract", current.tool))
        continue
      }
      const stageInput = {
        stage: "witness_contract",
        proposal: proposalOf(proposal, current),
        reasons: first.reasons,
        ...(input.disclosure !== undefined ? { disclosure: input.disclosure } : {}),
        config: resolvePin(pin).config,
        now
      }
      const { result, inv } = yield* callStage(plugins, pin, "witness_contract", WitnessContractOutput, stageInput, ctx)
      if (!result.ok) {
        const fallback = resolvePin(pin).fallback
        decisions.push(pluginDecision(pin, "witness_contract", inv, { fault: result.fault, message: result.message, fallback }))
        if (fallback === "DENY") return yield* finish("DENY", [faultReason(pin, result, fallback)])
        continue
      }
      decisions.push(pluginDecision(pin, "witness_contract", inv, { result: result.value }))
      if (result.value.contract !== null) offered.push({ contract: result.value.contract, narrowing: isNarrowingPin(policy, pin) })
      if (result.value.presentation !== undefined) presentation = morePrivate(presentation, result.value.presentation)
    }
    const final = decide(folded, offered)
    return yield* finish(final.verdict, final.reasons, final.contract)
  })

/**
 * Two providers' presentations: the one that discloses less wins (a redaction is never undone
 * by another provider's exact view); between equals, the first in pin order.
 */
const morePrivate = (a: WitnessPresentation | undefined, b: WitnessPresentation): WitnessPresentation =>
  a === undefined || (a.disclosure === "exact" && b.disclosure === "redacted") ? b : a

/** Runs observers; their faults are recorded and change nothing (observers never authorize). */
const observe = (
  plugins: Plugins,
  policy: ActivePolicy,
  event: { readonly event: "adjudicated" | "admitted" | "quarantined"; readonly principal: string; readonly tool: string; readonly args: JsonValue; readonly verdict: string; readonly reasons: ReadonlyArray<Reason> },
  now: number,
  decisions: Decision[]
): Effect.Effect<void> =>
  Effect.gen(function* () {
    for (const pin of pinsFor(policy, "observe")) {
      if (!pinAppliesTo(pin, event.tool)) {
        decisions.push(notInScopeDecision(pin, "observe", event.tool))
        continue
      }
      const stageInput = { stage: "observe", ...event, config: resolvePin(pin).config, now }
      const { result, inv } = yield* callStage(plugins, pin, "observe", Schema.Unknown, stageInput, { principal: event.principal, now })
      decisions.push(pluginDecision(pin, "observe", inv, result.ok ? { result: {} } : { fault: result.fault, message: result.message, fallback: "ignore" }))
    }
  })

/**
 * The admission pipeline: every admission plugin (any QUARANTINE wins; a fault quarantines),
 * then observers, which see the outcome but never the result bytes.
 */
export const admitWith = (plugins: Plugins, input: AdmissionInput): Effect.Effect<AdmissionOutcome> =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const decisions: Decision[] = []
    const opinions: AdmitOpinion[] = []
    for (const pin of pinsFor(input.policy, "admit")) {
      if (!pinAppliesTo(pin, input.tool)) {
        decisions.push(notInScopeDecision(pin, "admit", input.tool))
        continue
      }
      const stageInput = { stage: "admit", principal: input.principal, tool: input.tool, args: input.args, result: input.result, config: resolvePin(pin).config, now }
      const { result, inv } = yield* callStage(plugins, pin, "admit", AdmitOutput, stageInput, { principal: input.principal, now })
      if (result.ok) {
        decisions.push(pluginDecision(pin, "admit", inv, { result: result.value }))
        opinions.push({ by: pluginBy(pin), ...result.value })
      } else {
        decisions.push(pluginDecision(pin, "admit", inv, { fault: result.fault, message: result.message, fallback: "QUARANTINE" }))
        opinions.push({ by: pluginBy(pin), verdict: "QUARANTINE", reason: `plugin fault (${result.fault}): ${result.message.slice(0, 300)}; fallback QUARANTINE` })
      }
    }
    const decided = foldAdmission(opinions)
    yield* observe(
      plugins,
      input.policy,
      {
        event: decided.admitted ? "admitted" : "quarantined",
        principal: input.principal,
        tool: input.tool,
        args: input.args,
        verdict: decided.admitted ? "ADMIT" : "QUARANTINE",
        reasons: decided.admitted ? [] : [{ by: decided.by, reason: decided.reason }]
      },
      now,
      decisions
    )
    return decided.admitted ? { admitted: true, decisions } : { admitted: false, by: decided.by, reason: decided.reason, decisions }
  })

/** Provides the Adjudicator seam with the plugin pipeline over the plugins the policy pins. */
export const layerPluginAdjudicator = Layer.effect(
  Adjudicator,
  Effect.gen(function* () {
    const plugins = yield* pluginServices
    return Adjudicator.of({ adjudicate: (input) => adjudicateWith(plugins, input) })
  })
)

/** Provides the Admission seam with the admission-plugin pipeline. */
export const layerPluginAdmission = Layer.effect(
  Admission,
  Effect.gen(function* () {
    const plugins = yield* pluginServices
    return Admission.of({ admit: (input) => admitWith(plugins, input) })
  })
)

/**
 * Everything the kernel needs from this module: the Adjudicator and Admission seams over the
 * plugin host, given where plugin bytes come from and what backs the host functions.
 */
export const layerPlugins = <E1, R1, E2, R2>(source: Layer.Layer<PluginSource, E1, R1>, env: Layer.Layer<PluginHostEnv, E2, R2>) =>
  Layer.mergeAll(layerPluginAdjudicator, layerPluginAdmission).pipe(Layer.provideMerge(Layer.merge(layerPluginHost.pipe(Layer.provide(source)), env)))

