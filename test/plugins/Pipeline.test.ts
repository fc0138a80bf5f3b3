// The stage pipeline over real compiled plugins: order, transforms, folding, admission.
import { sha256Hex } from "../../runtime/schema/Canonical.js"
import { deriveAdjudicationInputs } from "../../runtime/plugins/StageInputs.js"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Adjudicator } from "../../runtime/policy/Adjudicator.js"
import { Admission } from "../../runtime/policy/Admission.js"
import type { Decision } from "../../runtime/schema/Events.js"
import type { PluginPin } from "../../runtime/schema/PluginPin.js"
import { Now, pinOf, pipelineLayer, policyWith, proposal } from "./support.js"

const stageOf = (d: Decision): string => (d.output as { stage: string }).stage
const spendLimit = pinOf("spend-limit", { config: { rules: { "payments.transfer": { amount_field: "amount", witness_above: 100, deny_above: 1000 } } } })
const alias = (aliases: Record<string, string>) => pinOf("tool-alias", { config: { aliases } })
const financeWitness = pinOf("finance-witness", { config: { tool_prefix: "payments.", class: "finance" } })
const auditLog = pinOf("audit-log")
const secretScan = pinOf("secret-scan")
const fixed = (config: Record<string, unknown>, precedence = 100): PluginPin => pinOf("fixtures/fixed-verdict", { config: config as PluginPin["config"], precedence })

describe("pipeline", () => {
  it.scoped("runs transform -> adjudicate -> witness_contract -> observe, and re-adjudicates the transformed call", () =>
    Effect.gen(function* () {
      const adj = yield* Adjudicator
      const policy = policyWith([auditLog, financeWitness, spendLimit, alias({ pay: "payments.transfer" })])
      const r = yield* adj.adjudicate({ proposal: proposal("pay", { amount: 500, to: "bob" }), policy, now: Now })
      expect(r.executed).toEqual({ tool: "payments.transfer", args: { amount: 500, to: "bob" } })
      expect(r.verdict).toBe("REQUIRE_WITNESS")
      expect(r.reasons).toEqual([{ by: "plugin:spend-limit@1.0.0", reason: "amount 500 is over the witness threshold 100" }])
      expect(r.contract).toEqual({ rule: { class: "finance" }, summary: "finance approval for payments.transfer" })
      // The transform ran twice: it replaced `pay`, then (from the start) kept payments.transfer.
      expect(r.decisions.map(stageOf)).toEqual(["transform", "transform", "adjudicate", "witness_contract", "observe"])
      expect((r.decisions[0]!.output as { result: unknown }).result).toEqual({ action: "replace", tool: "payments.transfer", args: { amount: 500, to: "bob" }, reason: "alias pay -> payments.transfer" })
      // Transform and adjudicate records keep the input's digest, not a copy; the input is
      // re-derived from the proposal and the decisions before it: the adjudicator saw the replacement.
      const adjDecision = r.decisions[2]!
      expect((adjDecision.output as { input?: unknown }).input).toBeUndefined()
      const derived = deriveAdjudicationInputs(proposal("pay", { amount: 500, to: "bob" }), { tool: "pay", args: { amount: 500, to: "bob" } }, r.decisions, (d) => policy.profiles[0]!.plugins!.find((pin) => `plugin:${pin.name}@${pin.version}` === d.by)?.config ?? {})
      const adjInput = derived[2]!
      if (adjInput.kind !== "derived") throw new Error("the adjudicate input is not derived")
      expect((JSON.parse(adjInput.text(Now)) as { proposal: { tool: string } }).proposal.tool).toBe("payments.transfer")
      expect(sha256Hex(adjInput.text(Now))).toBe(adjDecision.input_digest)
      for (const d of r.decisions) {
        expect(d.digest).toMatch(/^[0-9a-f]{64}$/)
        expect(d.input_digest).toMatch(/^[0-9a-f]{64}$/)
      }
    }).pipe(Effect.provide(pipelineLayer()))
  )

  it.scoped("a pin scoped to other tools is not run: each of its stages is recorded as not in scope for the call's tool", () =>
    Effect.gen(function* () {
      const adj = yield* Adjudicator
      const admission = yield* Admission
      // The alias would turn `pay` into payments.transfer, but it applies to fs_* calls only; spend-limit applies to payments.transfer only.
      const scopedAlias = pinOf("tool-alias", { config: { aliases: { pay: "payments.transfer" } }, tools: ["fs_*"] })
      const scopedLimit = pinOf("spend-limit", { config: { rules: { pay: { amount_field: "amount", deny_above: 1 } } }, tools: ["payments.transfer"] })
      const policy = policyWith([scopedAlias, scopedLimit, pinOf("secret-scan", { tools: ["notes.read"] })])
      const r = yield* adj.adjudicate({ proposal: proposal("pay", { amount: 500 }), policy, now: Now })
      expect(r.executed.tool).toBe("pay")
      expect(r.decisions.map((d) => d.output)).toEqual([
        { stage: "transform", scope: "not_in_scope", tool: "pay" },
        { stage: "adjudicate", scope: "not_in_scope", tool: "pay" }
      ])
      expect(r.decisions.every((d) => d.digest !== undefined && d.input_digest === undefined)).toBe(true)
      const admitted = yield* admission.admit({ principal: "alice", tool: "pay", args: {}, result: "token ghp_abc", policy })
      expect(admitted.admitted).toBe(true)
      expect(admitted.decisions.map((d) => d.output)).toEqual([{ stage: "admit", scope: "not_in_scope", tool: "pay" }])
      // In scope, the same pins run: the alias replaces the call, spend-limit judges the replacement.
      const inScope = yield* adj.adjudicate({ proposal: proposal("pay", { amount: 500 }), policy: policyWith([{ ...scopedAlias, tools: ["pay"] }, scopedLimit]), now: Now })
      expect(inScope.executed.tool).toBe("payments.transfer")
      expect(inScope.decisions.map(stageOf)).toEqual(["transform", "transform", "adjudicate"])
      expect((inScope.decisions[1]!.output as { scope?: string }).scope).toBe("not_in_scope")
    }).pipe(Effect.provide(pipelineLayer()))
  )

  it.scoped("a transform loop fails closed", () =>
    Effect.gen(function* () {
      const adj = yield* Adjudicator
      const r = yield* adj.adjudicate({ proposal: proposal("a"), policy: policyWith([alias({ a: "b", b: "a" }), fixed({ verdict: "ALLOW" })], ["a", "b"]), now: Now })
      expect(r.verdict).toBe("DENY")
      expect(r.reasons[0]!.reason).toContain("transform loop")
      expect(r.decisions.filter((d) => stageOf(d) === "adjudicate")).toEqual([])
    }).pipe(Effect.provide(pipelineLayer()))
  )

  it.scoped("a transform chain over the depth bound fails closed", () =>
    Effect.gen(function* () {
      const adj = yield* Adjudicator
      const grown = Array.from({ length: 8 }, (_, i) => "t" + ".x".repeat(i))
      const r = yield* adj.adjudicate({ proposal: proposal("t"), policy: policyWith([pinOf("fixtures/transform-grows"), fixed({ verdict: "ALLOW" })], grown), now: Now })
      expect(r.verdict).toBe("DENY")
      expect(r.reasons[0]!.reason).toContain("depth over the bound of 4")
    }).pipe(Effect.provide(pipelineLayer()))
  )

  it.scoped("a transform never inherits authority: an ungranted replacement is denied", () =>
    Effect.gen(function* () {
      const adj = yield* Adjudicator
      const r = yield* adj.adjudicate({ proposal: proposal("pay", { amount: 1 }), policy: policyWith([alias({ pay: "payments.admin_override" }), fixed({ verdict: "ALLOW" })]), now: Now })
      expect(r.verdict).toBe("DENY")
      expect(r.reasons[0]!.reason).toContain("has no capability for tool")
    }).pipe(Effect.provide(pipelineLayer()))
  )

  it.scoped("real-plugin permutations: plugin order never changes the folded outcome", () =>
    Effect.gen(function* () {
      const adj = yield* Adjudicator
      const configs = [
        { verdict: "ALLOW" },
        { verdict: "REQUIRE_WITNESS", reason: "big", contract: { rule: { class: "finance" } } },
        { verdict: "REQUIRE_WITNESS", reason: "new payee", contract: { rule: { class: "security" }, veto: ["legal"] } },
        { verdict: "DEFER" }
      ]
      const perms = permutations(configs.map((_, i) => i))
      const outcomes = yield* Effect.forEach(perms, (order) =>
        adj
          .adjudicate({ proposal: proposal("search"), policy: policyWith([...order.map((ci, pos) => fixed(configs[ci]!, pos)), spendLimit]), now: Now })
          .pipe(Effect.map((r) => ({ verdict: r.verdict, reasons: r.reasons, contract: r.contract, ran: r.decisions.map((d) => d.input_digest ?? "") })))
      )
      expect(new Set(outcomes.map((o) => o.ran.join("|"))).size).toBe(perms.length)
      for (const o of outcomes) expect({ ...o, ran: undefined }).toEqual({ ...outcomes[0]!, ran: undefined })
      expect(outcomes[0]!.verdict).toBe("REQUIRE_WITNESS")
      expect(outcomes[0]!.contract).toEqual({ rule: { all: [{ class: "finance" }, { class: "security" }] }, veto: ["legal"] })
    }).pipe(Effect.provide(pipelineLayer()))
  )

  it.scoped("adding a plugin never widens", () =>
    Effect.gen(function* () {
      const adj = yield* Adjudicator
      const run = (pins: ReadonlyArray<PluginPin>) => adj.adjudicate({ proposal: proposal("payments.transfer", { amount: 500 }), policy: policyWith(pins), now: Now }).pipe(Effect.map((r) => r.verdict))
      const Rank = { ALLOW: 0, REQUIRE_WITNESS: 1, DENY: 2 } as const
      const base = yield* run([spendLimit])
      expect(base).toBe("REQUIRE_WITNESS")
      for (const extra of [{ verdict: "ALLOW" }, { verdict: "DEFER" }, { verdict: "REQUIRE_WITNESS" }, { verdict: "DENY", reason: "no" }]) {
        const after = yield* run([spendLimit, fixed(extra)])
        expect(Rank[after]).toBeGreaterThanOrEqual(Rank[base])
      }
      expect(yield* run([spendLimit, fixed({ verdict: "DENY", reason: "no" })])).toBe("DENY")
    }).pipe(Effect.provide(pipelineLayer()))
  )

  it.scoped("no adjudicator, or all deferring: the floor denies", () =>
    Effect.gen(function* () {
      const adj = yield* Adjudicator
      const none = yield* adj.adjudicate({ proposal: proposal("search"), policy: policyWith([]), now: Now })
      const defer = yield* adj.adjudicate({ proposal: proposal("search"), policy: policyWith([fixed({ verdict: "DEFER" })]), now: Now })
      expect(none.verdict).toBe("DENY")
      expect(defer.verdict).toBe("DENY")
      expect(defer.reasons).toEqual([{ by: "floor", reason: expect.stringContaining("floor denies") }])
    }).pipe(Effect.provide(pipelineLayer()))
  )

  it.scoped("host functions: kv and counter values are served within the grant and recorded", () =>
    Effect.gen(function* () {
      const adj = yield* Adjudicator
      const dailyCap = pinOf("daily-cap", { config: { tools: ["payments.transfer"], amount_field: "amount", default_cap: 5000 } })
      const r = yield* adj.adjudicate({ proposal: proposal("payments.transfer", { amount: 50 }), policy: policyWith([spendLimit, dailyCap]), now: Now })
      expect(r.verdict).toBe("REQUIRE_WITNESS")
      expect(r.reasons).toEqual([{ by: "plugin:daily-cap@1.0.0", reason: "daily spend 980 + 50 would pass the daily cap 1000" }])
      const d = r.decisions.find((x) => x.by === "plugin:daily-cap@1.0.0")!
      expect(d.host_values).toEqual([
        { fn: "wk_kv_get", arg: "limits/daily/alice", value: "1000" },
        { fn: "wk_counter", arg: "spent_today", value: 980 }
      ])
    }).pipe(Effect.provide(pipelineLayer({ kv: { "limits/daily/alice": "1000", "secrets/alice": "hunter2" }, counters: { spent_today: { alice: 980 } } })))
  )

  it.scoped("a kv read outside the granted prefix is a fault, not a value", () =>
    Effect.gen(function* () {
      const adj = yield* Adjudicator
      // Grant a narrower prefix than the one the plugin reads from.
      const dailyCap = pinOf("daily-cap", { capabilities: { host_functions: ["kv", "counter"], kv_prefix: "limits/daily/bob", counters: ["spent_today"] }, config: { tools: ["payments.transfer"], default_cap: 5000 } })
      const r = yield* adj.adjudicate({ proposal: proposal("payments.transfer", { amount: 50 }), policy: policyWith([spendLimit, dailyCap]), now: Now })
      expect(r.verdict).toBe("DENY")
      const d = r.decisions.find((x) => x.by === "plugin:daily-cap@1.0.0")!
      expect((d.output as { fault: string }).fault).toBe("host_fault")
      expect(d.host_values).toEqual([{ fn: "wk_kv_get", arg: "limits/daily/alice", fault: "key \"limits/daily/alice\" is outside the granted prefix 'limits/daily/bob'" }])
    }).pipe(Effect.provide(pipelineLayer({ kv: { "limits/daily/alice": "1000" } })))
  )

  it.scoped("admission quarantines a result with a planted secret; observers see the outcome, not the bytes", () =>
    Effect.gen(function* () {
      const admission = yield* Admission
      const policy = policyWith([secretScan, auditLog])
      const planted = yield* admission.admit({ principal: "alice", tool: "notes.read", args: { id: 1 }, result: { notes: ["hello", "aws key AKIAABCDEFGHIJKLMNOP"] }, policy })
      expect(planted.admitted).toBe(false)
      if (planted.admitted) return
      expect(planted.by).toBe("plugin:secret-scan@1.0.0")
      expect(planted.reason).toContain("secret marker")
      expect(planted.reason).not.toContain("AKIA")
      expect(planted.decisions.map(stageOf)).toEqual(["admit", "observe"])
      expect(JSON.stringify(planted.decisions)).not.toContain("AKIAABCDEFGHIJKLMNOP")
      const clean = yield* admission.admit({ principal: "alice", tool: "notes.read", args: { id: 1 }, result: { notes: ["hello"] }, policy })
      expect(clean.admitted).toBe(true)
    }).pipe(Effect.provide(pipelineLayer()))
  )

  it.scoped("an admission plugin fault quarantines", () =>
    Effect.gen(function* () {
      const admission = yield* Admission
      // secret-scan pinned with a 1-page memory cap cannot even start its runtime for a big result.
      const r = yield* admission.admit({ principal: "alice", tool: "notes.read", args: {}, result: { blob: "x".repeat(200_000) }, policy: policyWith([pinOf("secret-scan", { memory_max_pages: 2 })]) })
      expect(r.admitted).toBe(false)
      if (!r.admitted) expect(r.reason).toContain("fallback QUARANTINE")
    }).pipe(Effect.provide(pipelineLayer()))
  )
})

const permutations = <A>(xs: ReadonlyArray<A>): ReadonlyArray<ReadonlyArray<A>> =>
  xs.length <= 1 ? [xs] : xs.flatMap((x, i) => permutations([...xs.slice(0, i), ...xs.slice(i + 1)]).map((rest) => [x, ...rest]))

describe("faults at every stage", () => {
  const trapAt = (stage: "transform" | "witness_contract" | "admit" | "observe", overrides: Partial<PluginPin> = {}) => pinOf("fixtures/trap-every-stage", { stages: [stage], ...overrides })
  const faultIn = (ds: ReadonlyArray<Decision>, stage: string) => ds.find((d) => d.by === "plugin:trap-every-stage@1.0.0" && stageOf(d) === stage)!.output as { fault: string; fallback: string; message: string }

  it.scoped("a transform fault fails closed before any adjudicator runs", () =>
    Effect.gen(function* () {
      const adj = yield* Adjudicator
      const r = yield* adj.adjudicate({ proposal: proposal("search"), policy: policyWith([trapAt("transform"), fixed({ verdict: "ALLOW" })]), now: Now })
      expect(r.verdict).toBe("DENY")
      expect(faultIn(r.decisions, "transform")).toMatchObject({ fault: "trap", fallback: "DENY", message: expect.stringContaining("transform trap") })
      expect(r.decisions.some((d) => stageOf(d) === "adjudicate")).toBe(false)
    }).pipe(Effect.provide(pipelineLayer()))
  )

  it.scoped("a witness-contract provider fault denies, or (fallback REQUIRE_WITNESS) keeps the hold with the other contracts", () =>
    Effect.gen(function* () {
      const adj = yield* Adjudicator
      const witness = fixed({ verdict: "REQUIRE_WITNESS", reason: "big", contract: { rule: { class: "finance" } } })
      const denied = yield* adj.adjudicate({ proposal: proposal("search"), policy: policyWith([witness, trapAt("witness_contract")]), now: Now })
      expect(denied.verdict).toBe("DENY")
      expect(faultIn(denied.decisions, "witness_contract").fault).toBe("trap")
      const held = yield* adj.adjudicate({ proposal: proposal("search"), policy: policyWith([witness, trapAt("witness_contract", { fallback: "REQUIRE_WITNESS" })]), now: Now })
      expect(held.verdict).toBe("REQUIRE_WITNESS")
      expect(held.contract).toEqual({ rule: { class: "finance" } })
    }).pipe(Effect.provide(pipelineLayer()))
  )

  it.scoped("an admission fault quarantines; an observer fault changes nothing", () =>
    Effect.gen(function* () {
      const admission = yield* Admission
      const q = yield* admission.admit({ principal: "alice", tool: "notes.read", args: {}, result: { ok: true }, policy: policyWith([trapAt("admit")]) })
      expect(q.admitted).toBe(false)
      expect(faultIn(q.decisions, "admit")).toMatchObject({ fault: "trap", fallback: "QUARANTINE" })
      const a = yield* admission.admit({ principal: "alice", tool: "notes.read", args: {}, result: { ok: true }, policy: policyWith([secretScan, trapAt("observe")]) })
      expect(a.admitted).toBe(true)
      expect(faultIn(a.decisions, "observe")).toMatchObject({ fault: "trap", fallback: "ignore" })
      const adj = yield* Adjudicator
      const r = yield* adj.adjudicate({ proposal: proposal("search"), policy: policyWith([fixed({ verdict: "ALLOW" }), trapAt("observe")]), now: Now })
      expect(r.verdict).toBe("ALLOW")
    }).pipe(Effect.provide(pipelineLayer()))
  )
})
