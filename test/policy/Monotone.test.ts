import { afterAll, describe, expect, it } from "vitest"
import fc from "fast-check"
import { Effect, Layer, ManagedRuntime } from "effect"
import { devPublicKey } from "../../runtime/client/DevKeys.js"
import { satisfies, type Approval } from "../../runtime/heldcall/WitnessRuleEval.js"
import { decide } from "../../runtime/loops/Adjudicate.js"
import { activePolicy } from "../../runtime/policy/ActivePolicy.js"
import type { Adjudication } from "../../runtime/policy/Adjudicator.js"
import { checkLayers, widens } from "../../runtime/policy/Layers.js"
import { layerProfileSeams } from "../../runtime/plugins/ProfileSeams.js"
import { layerHostEnvMemory } from "../../runtime/plugins/HostEnv.js"
import { layerPluginHost } from "../../runtime/plugins/PluginHost.js"
import { layerPluginSourceDir } from "../../runtime/plugins/PluginSource.js"
import { callDigest, canonicalize } from "../../runtime/schema/Canonical.js"
import type { JsonObject } from "../../runtime/schema/Json.js"
import type { PluginPin } from "../../runtime/schema/PluginPin.js"
import type { Profile, ToolRule } from "../../runtime/schema/Profile.js"
import type { EvidenceTerm } from "../../runtime/schema/EvidenceTerm.js"
import type { Fallback, WitnessContract, WitnessRule } from "../../runtime/schema/WitnessContract.js"
import { HeldId, T0, given, proposed } from "../heldcall/Given.js"
import { pinOf, pluginsRoot } from "../plugins/support.js"

// Authority never widens, checked by running the kernel's own decision (kernel floor, the policy
// seams over the shipped plugins' built wasm, preferences) on generated policies and calls:
// - adding a narrowing layer (project rules and pins of real plugins with generated configs)
//   never makes any call's outcome less restrictive;
// - when `widens()` says a change to the organization's profile does not widen, no generated
//   call gets a less restrictive outcome under the changed profile (brute force over the calls).

const runtime = ManagedRuntime.make(
  layerProfileSeams.pipe(
    Layer.provide(Layer.merge(layerPluginHost.pipe(Layer.provide(layerPluginSourceDir(pluginsRoot))), layerHostEnvMemory({ counters: { spent_today: { "agent:alice": 700 } } })))
  )
)
afterAll(() => runtime.dispose())

const Alice = "agent:alice"
const principals = Object.fromEntries(
  (
    [
      [Alice, "agent"],
      ["user:carol", "human"],
      ["user:dave", "human"],
      ["svc:fraud", "fraud"],
      ["fin:fay", "finance"],
      ["compliance:zoe", "compliance"]
    ] as const
  ).map(([p, c]) => [p, { keys: [devPublicKey(p)], classes: [c] }])
)
const Tools = ["money_transfer", "bank_balance", "payments.transfer", "fs_write"] as const

interface Call {
  readonly tool: string
  readonly args: JsonObject
}

/** The kernel's decision for Alice's call under the profiles. */
const outcome = (profiles: ReadonlyArray<Profile>, call: Call): Promise<Adjudication> => {
  const facts = given({ ...proposed(1), principal: Alice, tool: call.tool, args: call.args, call_digest: callDigest(call.tool, call.args) })
  return runtime.runPromise(decide(facts, activePolicy(1, profiles), T0) as Effect.Effect<Adjudication, never, never>)
}

const Rank = { ALLOW: 0, REQUIRE_WITNESS: 1, DENY: 2 } as const
// Every set of approvals from one witness per class of the registry (2^5 sets).
const pool: ReadonlyArray<Approval> = [
  { witness: "user:carol", class: "human" },
  { witness: "user:dave", class: "human" },
  { witness: "svc:fraud", class: "fraud" },
  { witness: "fin:fay", class: "finance" },
  { witness: "compliance:zoe", class: "compliance" }
]
const approvalSets: ReadonlyArray<ReadonlyArray<Approval>> = Array.from({ length: 1 << pool.length }, (_, m) => pool.filter((_, i) => (m & (1 << i)) !== 0))

/** Why `after` is less restrictive than `before` for one call, or undefined when it is not. */
const looser = (before: Adjudication, after: Adjudication): string | undefined => {
  if (Rank[after.verdict] < Rank[before.verdict]) return `${before.verdict} became ${after.verdict}`
  if (before.verdict !== "REQUIRE_WITNESS" || after.verdict !== "REQUIRE_WITNESS") return undefined
  const b = before.contract as WitnessContract
  const a = after.contract as WitnessContract
  const veto = new Set(a.veto ?? [])
  const dropped = (b.veto ?? []).filter((v) => !veto.has(v))
  if (dropped.length > 0) return `veto ${dropped.join(", ")} dropped`
  if (b.route !== undefined && a.route === undefined) return "the witness route is dropped"
  const terms = new Set((a.evidence ?? []).map((t) => canonicalize(t)))
  if ((b.evidence ?? []).some((t) => !terms.has(canonicalize(t)))) return "an evidence term is dropped"
  if (a.fallback?.action === "route" && canonicalize(a.fallback) !== canonicalize(b.fallback ?? null)) return "a routing fallback appears or changes"
  const weaker = approvalSets.find((s) => satisfies(a.rule, s) && !satisfies(b.rule, s))
  return weaker === undefined ? undefined : `approvals ${JSON.stringify(weaker)} satisfy ${JSON.stringify(a.rule)} but not ${JSON.stringify(b.rule)}`
}

const opt = <A>(a: fc.Arbitrary<A>) => fc.option(a, { nil: undefined })
const clean = <A>(a: A): A => JSON.parse(JSON.stringify(a)) as A
const amount = fc.constantFrom(0, 400, 900, 1_500, 6_000, 40_000, 150_000)
const witnessRule = fc.constantFrom<WitnessRule>(
  { class: "human" },
  { class: "human", count: 2 },
  { principal: "user:carol" },
  { all: [{ class: "human" }, { class: "fraud" }] },
  { any: [{ class: "finance" }, { principal: "user:carol" }] },
  { quorum: { n: 2, of: [{ class: "human" }, { class: "fraud" }, { class: "finance" }] } }
)
const ciPassed: EvidenceTerm = { name: "ci", kind: "ci-status", by: { class: "fraud" }, expect: { state: "success" } }
const contract: fc.Arbitrary<WitnessContract> = fc
  .record({
    rule: witnessRule,
    veto: opt(fc.subarray(["compliance", "fraud"], { minLength: 1 })),
    fallback: opt(fc.constantFrom<Fallback>({ after_ms: 60_000, action: "deny" }, { after_ms: 30_000, action: "deny" }, { after_ms: 60_000, action: "route", rule: { class: "finance" } })),
    evidence: opt(fc.constant([ciPassed]))
  })
  .map((c) => clean(c) as WitnessContract)
const toolRule: fc.Arbitrary<ToolRule> = fc
  .record({ witness_above: opt(amount), deny_above: opt(amount), always_witness: opt(fc.constant(true)), contract: opt(contract) })
  .map((r) => clean({ amount_field: "amount", ...r }) as ToolRule)
const pluginRules = fc.dictionary(fc.constantFrom(...Tools), toolRule, { maxKeys: 2 })

// Real shipped plugins, pinned with generated configs.
const spendLimit = (stagesPrecedence: number) =>
  fc.record({ rules: pluginRules, unknown_tools: opt(fc.constantFrom("allow", "defer")) }).map((config) => pinOf("spend-limit", { precedence: stagesPrecedence, config: clean(config) as PluginPin["config"] }))
const transferLimit = fc
  .record({ witness_above: opt(amount), deny_above: opt(amount), daily_witness_above: opt(amount), daily_deny_above: opt(amount) })
  .map((config) => pinOf("transfer-limit", { config: clean(config) as PluginPin["config"] }))
const financeWitness = fc.record({ tool_prefix: fc.constantFrom("payments.", "money_"), class: fc.constantFrom("finance", "fraud"), count: fc.constantFrom(1, 2) }).map((config) => pinOf("finance-witness", { config }))
const humanApproval = fc.record({ tools: fc.subarray(["money_transfer", "payments.*", "fs_*"]), default_disclosure: fc.constantFrom("exact", "redacted") }).map((config) => pinOf("human-approval", { config }))
const anyPin = fc.oneof(spendLimit(10), transferLimit, financeWitness, humanApproval)

const org: fc.Arbitrary<Profile> = fc
  .record({ transfer: opt(toolRule), payments: opt(toolRule), pin: opt(spendLimit(10)) })
  .map((r) =>
    clean<Profile>({
      name: "org",
      layer: "organization",
      principals,
      grants: { [Alice]: ["money_transfer", "bank_balance", "payments.transfer"] },
      rules: { ...(r.transfer ? { money_transfer: r.transfer } : {}), ...(r.payments ? { "payments.transfer": r.payments } : {}) },
      ...(r.pin ? { plugins: [r.pin] } : {}),
      admins: ["user:carol"]
    })
  )

const narrowingLayer: fc.Arbitrary<Profile> = fc
  .record({ rule: opt(toolRule), pins: fc.array(anyPin, { maxLength: 2 }), grants: opt(fc.subarray(["money_transfer", "bank_balance"])) })
  .map((r) =>
    clean<Profile>({
      name: "project",
      layer: "project",
      ...(r.rule ? { rules: { money_transfer: r.rule } } : {}),
      ...(r.pins.length > 0 ? { plugins: r.pins } : {}),
      ...(r.grants ? { grants: { [Alice]: r.grants } } : {})
    })
  )

// One change an admin could apply to the organization's profile: some narrow, some widen.
type Tweak = (p: Profile) => Profile
const ruleTweak = (f: (r: ToolRule | undefined) => ToolRule | undefined, tool: string): Tweak => (p) => {
  const rules = { ...(p.rules ?? {}) }
  const next = f(rules[tool])
  if (next === undefined) delete rules[tool]
  else rules[tool] = next
  return clean({ ...p, rules })
}
const tweak: fc.Arbitrary<Tweak> = fc.oneof(
  fc.tuple(fc.constantFrom("witness_above", "deny_above"), fc.constantFrom(0.1, 0.5, 2, 10), fc.constantFrom("money_transfer", "payments.transfer")).map(([k, f, tool]) =>
    ruleTweak((r) => (r === undefined || r[k] === undefined ? r : { ...r, [k]: Math.round(r[k]! * f) }), tool)
  ),
  fc.tuple(toolRule, fc.constantFrom("money_transfer", "payments.transfer")).map(([rule, tool]) => ruleTweak(() => rule, tool)),
  fc.constantFrom("money_transfer", "payments.transfer").map((tool) => ruleTweak(() => undefined, tool)),
  fc.tuple(fc.boolean(), fc.constantFrom("money_transfer", "payments.transfer")).map(([on, tool]) => ruleTweak((r) => (r === undefined ? r : clean({ ...r, always_witness: on ? true : undefined })), tool)),
  fc.tuple(contract, fc.constantFrom("money_transfer", "payments.transfer")).map(([c, tool]) => ruleTweak((r) => (r === undefined ? r : { ...r, contract: c }), tool)),
  spendLimit(10).map((pin): Tweak => (p) => clean({ ...p, plugins: [pin] })),
  fc.constant<Tweak>((p) => clean({ ...p, plugins: undefined })),
  fc.constant<Tweak>((p) => clean({ ...p, grants: { [Alice]: ["money_transfer"] } }))
)
/** An organization profile and the same profile after one or two changes. */
const change = fc.tuple(org, fc.array(tweak, { minLength: 1, maxLength: 2 })).map(([before, ts]) => [before, ts.reduce((p, t) => t(p), before)] as const)

const call: fc.Arbitrary<Call> = fc.record({ tool: fc.constantFrom(...Tools), amount: fc.oneof(amount, fc.constant(-1)) }).map((c) => ({ tool: c.tool, args: { amount: c.amount, to: "shop" } }))
const calls = fc.array(call, { minLength: 1, maxLength: 5 })

/** The first call whose outcome is looser under `after` than under `before`, described. */
const firstLooser = async (before: ReadonlyArray<Profile>, after: ReadonlyArray<Profile>, cs: ReadonlyArray<Call>): Promise<string | undefined> => {
  for (const c of cs) {
    const [b, a] = await Promise.all([outcome(before, c), outcome(after, c)])
    const why = looser(b, a)
    if (why !== undefined) return `${JSON.stringify(c)}: ${why} (before ${JSON.stringify(b.reasons)}, after ${JSON.stringify(a.reasons)})`
  }
  return undefined
}

describe("authority never widens (the kernel's decision over the shipped plugins)", () => {
  it("a valid narrowing layer never makes a call's outcome less restrictive", async () => {
    await fc.assert(
      fc.asyncProperty(org, narrowingLayer, calls, async (o, layer, cs) => {
        fc.pre(checkLayers([o, layer]).length === 0)
        expect(await firstLooser([o], [o, layer], cs)).toBeUndefined()
      }),
      { numRuns: 150 }
    )
  }, 60_000)

  it("when widens() finds nothing, no generated call gets a less restrictive outcome", async () => {
    await fc.assert(
      fc.asyncProperty(change, calls, async ([before, after], cs) => {
        fc.pre(widens([before], [after]).length === 0)
        expect(await firstLooser([before], [after], cs)).toBeUndefined()
      }),
      { numRuns: 150 }
    )
  }, 60_000)
})

describe("authority never widens: the changes the properties found", () => {
  const orgWith = (rules: Profile["rules"], plugins?: Profile["plugins"]): Profile =>
    clean<Profile>({ name: "org", layer: "organization", principals, grants: { [Alice]: ["money_transfer", "payments.transfer"] }, rules, ...(plugins ? { plugins } : {}), admins: ["user:carol"] })
  const holds = (contract?: WitnessContract) =>
    pinOf("spend-limit", { precedence: 10, config: clean({ rules: { money_transfer: { amount_field: "amount", always_witness: true, ...(contract ? { contract } : {}) } } }) as PluginPin["config"] })
  const quorum: WitnessContract = { rule: { quorum: { n: 2, of: [{ class: "human" }, { class: "fraud" }, { class: "finance" }] } } }
  const humanAndFraud: WitnessContract = { rule: { all: [{ class: "human" }, { class: "fraud" }] } }
  const transfer: Call = { tool: "money_transfer", args: { amount: 0, to: "shop" } }

  it("a rule's contract applies to a call a plugin holds, so the rule holding it too changes nothing", async () => {
    // Given a rule that names a contract but holds nothing itself, and a plugin that holds every transfer
    const before = orgWith({ money_transfer: { amount_field: "amount", contract: quorum } }, [holds()])
    // When the rule also holds every transfer
    const after = orgWith({ money_transfer: { amount_field: "amount", contract: quorum, always_witness: true } }, [holds()])
    // Then that is no widening, and the held call waits on the rule's contract either way
    expect(widens([before], [after])).toEqual([])
    expect((await outcome([before], transfer)).contract?.rule).toEqual(quorum.rule)
    expect(await firstLooser([before], [after], [transfer])).toBeUndefined()
  })

  it("a rule's contract made equal to a plugin's is not absorbed into it at the price of a place", async () => {
    // Given a rule asking for a human and a plugin asking for a human and a fraud officer
    const before = orgWith({ money_transfer: { amount_field: "amount", contract: { rule: { class: "human" } } } }, [holds(humanAndFraud)])
    // When the rule asks for what the plugin asks for
    const after = orgWith({ money_transfer: { amount_field: "amount", contract: humanAndFraud } }, [holds(humanAndFraud)])
    // Then no approval set meets the later contract that did not meet the earlier one, but the
    // fraud officer's approval now counts, so it may edit (propose) transfers: a power it lacked
    expect(widens([before], [after]).map((w) => `${w.field}: ${w.message}`)).toEqual(["rules.money_transfer.contract: svc:fraud: edits held money_transfer calls"])
    expect(await firstLooser([before], [after], [transfer])).toBeUndefined()
  })

  it("a first adjudicate plugin pinned by the organization is a widening: its contract stands in for the default one", async () => {
    // Given a rule that holds every transfer for the default contract (one human)
    const before = orgWith({ money_transfer: { amount_field: "amount", always_witness: true } })
    // When the organization pins a plugin that holds transfers for one finance officer or Carol
    const after = orgWith({ money_transfer: { amount_field: "amount", always_witness: true } }, [holds({ rule: { any: [{ class: "finance" }, { principal: "user:carol" }] } })])
    // Then the outcome is looser, and widens() says so
    expect(await firstLooser([before], [after], [transfer])).toContain("satisfy")
    expect(widens([before], [after]).map((w) => w.field)).toEqual(["plugins.spend-limit"])
  })

  it("a contract a rule names for the first time is compared with the default one", () => {
    const before = orgWith({ money_transfer: { amount_field: "amount", always_witness: true } })
    const after = orgWith({ money_transfer: { amount_field: "amount", always_witness: true, contract: { rule: { class: "finance" } } } })
    expect(widens([before], [after]).map((w) => `${w.field}: ${w.message}`)).toEqual([
      "rules.money_transfer.contract: fin:fay: edits held money_transfer calls",
      "rules.money_transfer.contract.rule: the witness rule no longer requires {\"class\":\"human\"}"
    ])
    const added = orgWith({ money_transfer: { amount_field: "amount", always_witness: true }, "payments.transfer": { contract: { rule: { class: "finance" } } } })
    expect(widens([before], [added]).map((w) => w.field)).toEqual(["rules.payments.transfer.contract", "rules.payments.transfer.contract.rule"])
  })
})
