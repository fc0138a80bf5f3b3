// An auditor re-runs recorded decisions from the pinned wasm and the recorded host values.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Adjudicator } from "../../runtime/policy/Adjudicator.js"
import { Admission } from "../../runtime/policy/Admission.js"
import type { Decision } from "../../runtime/schema/Events.js"
import { rerunDecision } from "../../runtime/plugins/Rerun.js"
import { pluginBy } from "../../runtime/plugins/Pipeline.js"
import { deriveAdjudicationInputs } from "../../runtime/plugins/StageInputs.js"
import type { Proposal } from "../../runtime/policy/Adjudicator.js"
import type { PluginPin } from "../../runtime/schema/PluginPin.js"
import { artifact, Now, pinOf, pipelineLayer, policyWith, proposal } from "./support.js"

const spendLimit = pinOf("spend-limit", { config: { rules: { "payments.transfer": { amount_field: "amount", witness_above: 100 } } } })
const dailyCap = pinOf("daily-cap", { config: { tools: ["payments.transfer"], default_cap: 1000 } })
const byName = (ds: ReadonlyArray<Decision>, name: string) => ds.find((d) => d.by === `plugin:${name}@1.0.0`)!

/**
 * The input text of each decision of an adjudication, re-derived as the auditor does: from the
 * proposal, the decisions before it and each pin's config (the record keeps only the digest).
 */
const derivedInputs = (p: Proposal, decisions: ReadonlyArray<Decision>, pins: ReadonlyArray<PluginPin>, now: number): ReadonlyMap<Decision, string> => {
  const derived = deriveAdjudicationInputs(p, p, decisions, (d) => pins.find((pin) => pluginBy(pin) === d.by && pin.sha256 === d.digest)?.config ?? {})
  return new Map(decisions.flatMap((d, i) => { const x = derived[i]!; return x.kind === "derived" ? [[d, x.text(now)] as const] : [] }))
}

describe("rerunDecision", () => {
  it.scoped("re-runs adjudications, host values included, and detects a doctored record", () =>
    Effect.gen(function* () {
      const adj = yield* Adjudicator
      const p = proposal("payments.transfer", { amount: 50 })
      const r = yield* adj.adjudicate({ proposal: p, policy: policyWith([spendLimit, dailyCap]), now: Now })
      // The record keeps the input's digest, not a copy: the input is re-derived from the proposal.
      expect(r.decisions.every((d) => (d.output as Record<string, unknown>)["input"] === undefined)).toBe(true)
      const inputs = derivedInputs(p, r.decisions, [spendLimit, dailyCap], Now)
      const sl = yield* rerunDecision(artifact("spend-limit").bytes, byName(r.decisions, "spend-limit"), { inputText: inputs.get(byName(r.decisions, "spend-limit"))! })
      expect(sl.matches).toBe(true)
      const dc = byName(r.decisions, "daily-cap")
      const dcInput = inputs.get(dc)!
      expect(dc.host_values?.length).toBe(2)
      const again = yield* rerunDecision(artifact("daily-cap").bytes, dc, { inputText: dcInput })
      expect(again).toEqual({ matches: true, recorded: again.rerun, rerun: again.recorded })
      // A record whose host value was changed after the fact no longer reproduces its output.
      const doctored = { ...dc, host_values: [dc.host_values![0]!, { fn: "wk_counter", arg: "spent_today", value: 0 }] }
      expect((yield* rerunDecision(artifact("daily-cap").bytes, doctored, { inputText: dcInput })).matches).toBe(false)
      // Other bytes than the recorded digest are refused.
      const wrong = yield* Effect.flip(rerunDecision(artifact("spend-limit").bytes, dc, { inputText: dcInput }))
      expect(wrong.detail).toContain("hash to")
      // An input derived for another clock, or no input at all, is refused.
      const later = derivedInputs(p, r.decisions, [spendLimit, dailyCap], Now + 1).get(dc)!
      expect((yield* Effect.flip(rerunDecision(artifact("daily-cap").bytes, dc, { inputText: later }))).detail).toContain("input digests to")
      expect((yield* Effect.flip(rerunDecision(artifact("daily-cap").bytes, dc))).detail).toContain("no input")
    }).pipe(Effect.provide(pipelineLayer({ counters: { spent_today: { alice: 980 } } })))
  )

  it.scoped("re-runs a fault: a timeout is a timeout again", () =>
    Effect.gen(function* () {
      const adj = yield* Adjudicator
      const loop = pinOf("fixtures/loop-forever", { timeout_ms: 50 })
      const p = proposal("search")
      const r = yield* adj.adjudicate({ proposal: p, policy: policyWith([loop]), now: Now })
      const d = byName(r.decisions, "loop-forever")
      const rerun = yield* rerunDecision(artifact("fixtures/loop-forever").bytes, d, { timeout_ms: 50, inputText: derivedInputs(p, r.decisions, [loop], Now).get(d)! })
      expect(rerun).toEqual({ matches: true, recorded: { fault: "timeout" }, rerun: { fault: "timeout" } })
    }).pipe(Effect.provide(pipelineLayer()))
  )

  it.scoped("admission decisions need the input passed back (the record keeps only its digest)", () =>
    Effect.gen(function* () {
      const admission = yield* Admission
      const policy = policyWith([pinOf("secret-scan")])
      const out = yield* admission.admit({ principal: "alice", tool: "notes.read", args: {}, result: "token ghp_abc", policy })
      const d = byName(out.decisions, "secret-scan")
      expect((d.output as Record<string, unknown>).input).toBeUndefined()
      const missing = yield* Effect.flip(rerunDecision(artifact("secret-scan").bytes, d))
      expect(missing.detail).toContain("no input")
      // The auditor rebuilds the input from the stream (effect.recorded result, pin config, the
      // kernel clock, which is the TestClock's 0 here).
      const input = { stage: "admit", principal: "alice", tool: "notes.read", args: {}, result: "token ghp_abc", config: {}, now: 0 }
      expect((yield* rerunDecision(artifact("secret-scan").bytes, d, { input })).matches).toBe(true)
      const bad = yield* Effect.flip(rerunDecision(artifact("secret-scan").bytes, d, { input: { ...input, result: "token" } }))
      expect(bad.detail).toContain("input digests to")
    }).pipe(Effect.provide(pipelineLayer()))
  )
})
