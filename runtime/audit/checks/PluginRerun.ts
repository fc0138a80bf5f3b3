import { Effect, Either } from "effect"
import { makeRerunSession, rerunDecision, type RerunResult } from "../../plugins/Rerun.js"
import type { RerunError } from "../../plugins/PluginError.js"
import { pluginBy } from "../../plugins/Pipeline.js"
import { pinAppliesTo, resolvePin, type PluginPin } from "../../schema/PluginPin.js"
import { deriveAdjudicationInputs, findClock, type DerivedInput } from "../../plugins/StageInputs.js"
import { canonicalize, sha256Hex } from "../../schema/Canonical.js"
import type { Decision, HeldEvent } from "../../schema/Events.js"
import type { JsonValue } from "../../schema/Json.js"
import type { AuditError } from "../AuditError.js"
import type { Step, Traced } from "../HeldHistory.js"
import type { PinnedWasm } from "../PluginObjects.js"
import { collector, type CheckContext, type Finding } from "./Check.js"

/** How far from an admission event's time (before or after) the kernel clock it gave the plugin is searched. */
const AdmitClockSearchMs = 10_000

const decisionsOf = (e: HeldEvent): ReadonlyArray<Decision> =>
  e.type === "call.adjudicated" || e.type === "result.admitted" || e.type === "result.quarantined" ? e.decisions : []

const stageOf = (d: Decision): string | undefined => {
  const out = d.output
  return typeof out === "object" && out !== null && !Array.isArray(out) && typeof (out as Record<string, unknown>)["stage"] === "string" ? String((out as Record<string, unknown>)["stage"]) : undefined
}

/**
 * Rebuilds an admission decision's input (its record keeps only the digest): the effect's
 * result, the pin's config and the kernel clock, which is searched around the event's time.
 */
const admitInput = (s: Step, pin: PluginPin, inputDigest: string | undefined): JsonValue | undefined => {
  const f = s.before
  if (f.spec === null || f.effect === null || inputDigest === undefined) return undefined
  const result: JsonValue = f.effect.ok ? ((f.effect.result ?? null) as JsonValue) : { error: f.effect.error ?? "tool failed" }
  const base = { stage: "admit", principal: f.spec.principal, tool: f.spec.tool, args: f.spec.args, result, config: resolvePin(pin).config }
  const at = Date.parse(s.event.at)
  if (!Number.isFinite(at)) return undefined
  // JCS of the input is the same text for every candidate clock but the number after `"now":`:
  // the rest is canonicalized once, and each candidate costs one sha256.
  const [head, tail] = canonicalSplitAt(base, "now")
  // The event may be stamped before admission reads the clock, or after: nearest first, both ways.
  for (let d = 0; d <= AdmitClockSearchMs; d++) {
    if (sha256Hex(`${head}${at - d}${tail}`) === inputDigest) return { ...base, now: at - d }
    if (d > 0 && sha256Hex(`${head}${at + d}${tail}`) === inputDigest) return { ...base, now: at + d }
  }
  return undefined
}

/** The pins of the policy epoch a call.adjudicated event was decided under. */
const epochPins = (e: Extract<HeldEvent, { type: "call.adjudicated" }>, ctx: CheckContext): ReadonlyArray<PluginPin> | undefined =>
  ctx.policy.byEpoch(e.policy_epoch)?.policy.profiles.flatMap((p) => p.plugins ?? [])

/**
 * The inputs of a call.adjudicated event's transform and adjudicate decisions, re-derived from the
 * generation's proposal and the decisions before each (their records keep only input digests),
 * and where each pin was recorded as not in scope, the call it was not run for.
 */
const derivedInputs = (s: Step, decisions: ReadonlyArray<Decision>, ctx: CheckContext): ReadonlyArray<DerivedInput> | undefined => {
  const spec = s.before.spec
  if (s.event.type !== "call.adjudicated" || spec === null) return undefined
  const pins = epochPins(s.event, ctx) ?? []
  return deriveAdjudicationInputs(spec, spec, decisions, (d) => {
    const pin = pins.find((p) => p.sha256 === d.digest && pluginBy(p) === d.by)
    return pin === undefined ? undefined : resolvePin(pin).config
  })
}

/** The clock the adjudication's inputs were built with, found from the first derived input's digest. */
const clockOf = (s: Step, decisions: ReadonlyArray<Decision>, derived: ReadonlyArray<DerivedInput>): number | undefined => {
  const i = derived.findIndex((x) => x.kind === "derived")
  const first = derived[i]
  const digest = decisions[i]?.input_digest
  return first?.kind !== "derived" || digest === undefined ? undefined : findClock(first.text, digest, Date.parse(s.event.at), AdmitClockSearchMs)
}

/**
 * The JCS text of `{...value, [key]: x}` for any number x, as the text before and after x: the
 * top-level members sort by key (RFC 8785 3.2.3, UTF-16 code units), so `key` goes between
 * the members whose keys sort before it and those after.
 */
export const canonicalSplitAt = (value: Readonly<Record<string, unknown>>, key: string): readonly [string, string] => {
  const members = Object.keys(value)
    .filter((k) => k !== key && value[k] !== undefined)
    .sort()
    .map((k) => [k, `${JSON.stringify(k)}:${canonicalize(value[k])}`] as const)
  const before = members.filter(([k]) => k < key).map(([, m]) => m)
  const after = members.filter(([k]) => k > key).map(([, m]) => m)
  return [`{${[...before, `${JSON.stringify(key)}:`].join(",")}`, `${after.length > 0 ? "," : ""}${after.join(",")}}`]
}

/**
 * `plugin-rerun`: every recorded plugin decision (one with a digest) is re-run from the wasm
 * pinned by that digest in the object store, with its recorded input and host-function values,
 * under the pin's limits from the policy epoch it was made in, and must give the recorded output.
 * Decisions identical in everything a re-run depends on (wasm digest, input, recorded output and
 * host values, limits) are re-run once; `reused` counts the others.
 */
export const rerunPlugins = (
  calls: ReadonlyArray<Traced>,
  ctx: CheckContext,
  load: (sha256: string) => Effect.Effect<PinnedWasm, AuditError>
): Effect.Effect<Finding & { readonly reused: number }, AuditError> =>
  Effect.scoped(Effect.gen(function* () {
    const session = yield* Effect.acquireRelease(Effect.sync(makeRerunSession), (s) => Effect.promise(s.close))
    const violations: Array<Finding["violations"][number]> = []
    const unverified: Array<Finding["unverified"][number]> = []
    let checked = 0
    let reused = 0
    const runs = new Map<string, Either.Either<RerunResult, RerunError>>()
    for (const call of calls) {
      const c = collector("plugin-rerun", call.heldId)
      for (const s of call.steps) {
        if (!s.fresh) continue
        const decisions = decisionsOf(s.event)
        const derived = derivedInputs(s, decisions, ctx)
        const adjudicationClock = derived === undefined ? undefined : clockOf(s, decisions, derived)
        for (const [i, d] of decisions.entries()) {
          if (d.digest === undefined) continue
          c.count()
          const epochNo = s.event.type === "call.adjudicated" ? s.event.policy_epoch : ctx.policy.at(s.seq, s.event.at)?.epoch
          const epoch = epochNo === undefined ? undefined : ctx.policy.byEpoch(epochNo)
          const pins = (epoch?.policy.profiles ?? []).flatMap((p) => p.plugins ?? [])
          const pin = pins.find((p) => p.sha256 === d.digest && pluginBy(p) === d.by)
          if (epoch !== undefined && pin === undefined) {
            c.fail([s.seq], `${d.by} (${d.digest}) decided, but epoch ${epoch.epoch} pins no such plugin`)
            continue
          }
          const wasm = yield* load(d.digest)
          if (wasm.kind === "absent") {
            c.fail([s.seq], `${d.by}: no wasm/${d.digest} in the plugin object store`)
            continue
          }
          if (wasm.kind === "swapped") {
            c.fail([s.seq], `${d.by}: the object store's wasm/${d.digest} holds other bytes (sha256 ${wasm.actual})`)
            continue
          }
          const scoped = derived?.[i]
          if (scoped?.kind === "not_in_scope") {
            // Not run: the pin's scope (data in the profile) must exclude the call it was not run for.
            const recordedTool = (d.output as Record<string, unknown>)["tool"]
            if (recordedTool !== scoped.tool) c.fail([s.seq], `${d.by}: recorded as not in scope for ${String(recordedTool)}, but the call at that stage is ${scoped.tool}`)
            else if (pin !== undefined && pinAppliesTo(pin, scoped.tool)) c.fail([s.seq], `${d.by}: recorded as not in scope for ${scoped.tool}, but its pin applies to ${scoped.tool}`)
            else if (pin === undefined) c.unsure([s.seq], `${d.by}: not in scope for ${scoped.tool}; no policy record for its epoch to check the pin's scope against`)
            continue
          }
          let input: JsonValue | undefined
          let inputText: string | undefined
          if (scoped?.kind === "derived") {
            inputText = adjudicationClock === undefined ? undefined : scoped.text(adjudicationClock)
            if (inputText === undefined) {
              c.unsure([s.seq], `${d.by}: the ${stageOf(d)} input could not be re-derived from the proposal and the decisions before it (its record keeps only a digest)`)
              continue
            }
          }
          if (stageOf(d) === "admit") {
            input = pin === undefined ? undefined : admitInput(s, pin, d.input_digest)
            if (input === undefined) {
              c.unsure([s.seq], `${d.by}: the admission input could not be rebuilt from the log (its record keeps only a digest)`)
              continue
            }
          }
          const limits = pin === undefined ? {} : { timeout_ms: resolvePin(pin).timeout_ms, memory_max_pages: resolvePin(pin).memory_max_pages, isolation: resolvePin(pin).isolation }
          if (pin === undefined) c.unsure([s.seq], `${d.by}: no policy record for its epoch; re-run with default limits`)
          // Everything a re-run depends on: the same key gives the same outcome, so it runs once.
          // An input rebuilt or re-derived to hash to `input_digest`, which the key holds already.
          const key = [d.digest, d.input_digest ?? "", canonicalize(d.output ?? null), canonicalize(d.host_values ?? []), input === undefined && inputText === undefined ? "-" : "+", canonicalize(limits)].join("\u0000")
          let r = runs.get(key)
          if (r === undefined) {
            r = yield* Effect.either(rerunDecision(wasm.bytes, d, { ...limits, session, ...(input !== undefined ? { input } : {}), ...(inputText !== undefined ? { inputText } : {}) }))
            runs.set(key, r)
          } else reused++
          if (Either.isLeft(r)) c.fail([s.seq], `${d.by}: re-run refused: ${r.left.detail}`)
          else if (!r.right.matches) c.fail([s.seq], `${d.by}: re-run gave ${JSON.stringify(r.right.rerun)}, the log records ${JSON.stringify(r.right.recorded)}`)
        }
      }
      const f = c.done()
      checked += f.checked
      violations.push(...f.violations)
      unverified.push(...f.unverified)
    }
    return { checked, violations, unverified, reused }
  }))
