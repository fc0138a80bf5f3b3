import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { activePolicy, type ActivePolicy } from "../../runtime/policy/ActivePolicy.js"
import { authorityOf, describePowers, Policy } from "../../runtime/policy/Authority.js"
import { widens } from "../../runtime/policy/Layers.js"
import { adjudicateByRule, DefaultContract } from "../../runtime/policy/RuleAdjudicator.js"
import { templateFor } from "../../runtime/policy/PresentationTemplate.js"
import { approvingWitnesses } from "../../runtime/heldcall/Reconciler.js"
import { satisfies } from "../../runtime/heldcall/WitnessRuleEval.js"
import { canonicalize } from "../../runtime/schema/Canonical.js"
import type { EvidenceTerm } from "../../runtime/schema/EvidenceTerm.js"
import type { Profile, ToolRule } from "../../runtime/schema/Profile.js"
import type { WitnessContract, WitnessRule } from "../../runtime/schema/WitnessContract.js"

// The authority model against brute force. Given policies and changes over small domains, when
// `widens` calls a change narrowing, then no (principal, action, call) triple that the policy
// before refused is let through after: a call that runs unwitnessed, a set of approvals and
// vetoes that releases a call, an admin, a key, an edit, a veto, the text a witness is shown, a
// query a verifier runs. The reference below re-derives each from the kernel's own pieces (the
// rule adjudicator, rule satisfaction, the contract's approvers), not from the model.

const key = (i: number) => `${String.fromCharCode(65 + i).repeat(43)}=`
const Witnesses = ["user:h1", "user:h2", "svc:f", "comp:c"] as const
const Admins = ["admin:x", "admin:y"] as const
const Agent = "agent:a"
const Everyone = [Agent, ...Witnesses, ...Admins]
const Classes = ["human", "fraud", "compliance"] as const
const Tools = ["t", "u"] as const
const Amounts = [0, 600, 1_500, 200_000]
const Terms: ReadonlyArray<EvidenceTerm> = [
  { name: "merged", kind: "git-ancestry", by: { class: "fraud" }, params: { repo: "app" }, expect: { ancestor: true } },
  { name: "rows", kind: "sql-readback", by: { class: "fraud" }, params: { connection: "db", query: "select 1" }, expect: { row_count: 1 } }
]

const leaf: fc.Arbitrary<WitnessRule> = fc.oneof(
  fc.constantFrom(...Classes).map((c) => ({ class: c })),
  fc.constantFrom(...Witnesses).map((p) => ({ principal: p })),
  fc.constantFrom(...Classes).map((c) => ({ class: c, count: 2 }))
)
const rule: fc.Arbitrary<WitnessRule> = fc.oneof(
  leaf,
  fc.array(leaf, { minLength: 1, maxLength: 2 }).map((all) => ({ all })),
  fc.array(leaf, { minLength: 1, maxLength: 2 }).map((any) => ({ any }))
)
const contract: fc.Arbitrary<WitnessContract> = fc
  .record({ rule, veto: fc.subarray([...Classes]), evidence: fc.subarray([...Terms]) })
  .map(({ rule, veto, evidence }) => ({ rule, ...(veto.length > 0 ? { veto } : {}), ...(evidence.length > 0 ? { evidence } : {}) }))
const toolRule: fc.Arbitrary<ToolRule> = fc
  .record({ witness_above: fc.option(fc.constantFrom(500, 1_000), { nil: undefined }), deny_above: fc.option(fc.constant(100_000), { nil: undefined }), always_witness: fc.boolean(), contract: fc.option(contract, { nil: undefined }) })
  .map((r) => ({ amount_field: "amount", ...Object.fromEntries(Object.entries(r).filter(([, v]) => v !== undefined && v !== false)) }) as ToolRule)

const profile: fc.Arbitrary<Profile> = fc
  .record({
    witnesses: fc.tuple(...Witnesses.map(() => fc.record({ present: fc.boolean(), classes: fc.subarray([...Classes]), key: fc.integer({ min: 0, max: 1 }) }))),
    grants: fc.subarray([...Tools]),
    rules: fc.record({ t: fc.option(toolRule, { nil: undefined }), u: fc.option(toolRule, { nil: undefined }) }),
    admins: fc.subarray([...Admins]),
    presentation: fc.record({ t: fc.option(fc.constantFrom("Pay {amount}", "Refund 9 EUR"), { nil: undefined }) })
  })
  .map(({ witnesses, grants, rules, admins, presentation }) => ({
    name: "org",
    layer: "organization" as const,
    principals: Object.fromEntries([
      [Agent, { keys: [key(9)], classes: ["agent"] }],
      ...Admins.map((a, i) => [a, { keys: [key(10 + i)], classes: ["admin"] }] as const),
      ...witnesses.flatMap((w, i) => (w.present ? [[Witnesses[i]!, { keys: [key(i * 2 + w.key)], classes: w.classes }] as const] : []))
    ]),
    grants: { [Agent]: grants },
    rules: Object.fromEntries(Object.entries(rules).filter(([, r]) => r !== undefined)) as Record<string, ToolRule>,
    admins,
    ...(presentation.t !== undefined ? { presentation: { t: presentation.t } } : {})
  }))

/** A change: the profile before, and after it one in which each part is kept or taken from another profile. */
const change: fc.Arbitrary<readonly [Profile, Profile]> = fc
  .tuple(profile, profile, fc.array(fc.integer({ min: 0, max: 9 }).map((n) => n < 3), { minLength: 10, maxLength: 10 }))
  .map(([before, other, take]) => {
    const pick = <T,>(i: number, a: T, b: T): T => (take[i] ? b : a)
    const principals = Object.fromEntries(
      Everyone.flatMap((p, i) => {
        const e = pick(i % 7, before.principals?.[p], other.principals?.[p])
        return e === undefined ? [] : [[p, e] as const]
      })
    )
    const rules = Object.fromEntries(Tools.flatMap((t, i) => {
      const r = pick(7 + i, before.rules?.[t], other.rules?.[t])
      return r === undefined ? [] : [[t, r] as const]
    }))
    const after: Profile = { ...before, principals, rules, grants: pick(9, before.grants, other.grants), admins: pick(3, before.admins, other.admins) }
    const presentation = pick(4, before.presentation, other.presentation)
    const { presentation: _p, ...rest } = after
    return [before, presentation === undefined ? rest : { ...rest, presentation }] as const
  })

/** Every subset of `xs`. */
const subsets = <T>(xs: ReadonlyArray<T>): ReadonlyArray<ReadonlyArray<T>> => xs.reduce<ReadonlyArray<ReadonlyArray<T>>>((acc, x) => acc.flatMap((s) => [s, [...s, x]]), [[]])

/** What a policy lets through, as triples over the small domain, each a string. */
const letThrough = (policy: ActivePolicy): ReadonlySet<string> => {
  const out = new Set<string>()
  const registered = (p: string) => (policy.principals.get(p)?.keys.length ?? 0) > 0
  const classes = (p: string) => (registered(p) ? (policy.principals.get(p)?.classes ?? []) : [])
  for (const p of Everyone) {
    if (policy.admins.has(p)) out.add(`${p} applies policy`)
    for (const k of policy.principals.get(p)?.keys ?? []) out.add(`${p} signs with ${k}`)
    for (const c of classes(p)) out.add(`${p} acts as ${c}`)
  }
  for (const tool of Tools) {
    if (!(policy.grants.get(Agent)?.has(tool) ?? false)) continue
    out.add(`${Agent} proposes ${tool}`)
    const template = templateFor(policy.profiles, tool)
    if (template !== undefined) out.add(`${tool} is shown as ${template}`)
    // Who may edit or veto the tool's calls whenever one is held: what the contract a held call
    // of the tool waits on admits (the rule's, else the default one).
    const held = policy.rules.get(tool)?.contract ?? DefaultContract
    const approvers = approvingWitnesses(held)
    for (const w of Witnesses) {
      if (classes(w).some((k) => approvers.classes.includes(k)) || (registered(w) && approvers.principals.includes(w))) out.add(`${w} edits ${tool} when held`)
      if (classes(w).some((k) => (held.veto ?? []).includes(k))) out.add(`${w} vetoes ${tool} when held`)
    }
    for (const amount of Amounts) {
      const call = { principal: Agent, session_id: "s", turn_id: "t", call_id: "c", tool, args: { amount } }
      const a = adjudicateByRule({ proposal: call, policy, now: 0 })
      const released = (approving: ReadonlyArray<string>, vetoer: string | undefined) => out.add(`${tool} ${amount} released by [${approving.join(",")}] despite ${vetoer ?? "nobody"}`)
      if (a.verdict === "ALLOW") {
        // A call that runs unwitnessed runs whoever approves or vetoes.
        out.add(`${tool} ${amount} runs unwitnessed`)
        for (const approving of subsets(Witnesses)) for (const vetoer of [undefined, ...Witnesses]) released(approving, vetoer)
        continue
      }
      if (a.verdict !== "REQUIRE_WITNESS") continue
      const c = a.contract ?? DefaultContract
      for (const term of c.evidence ?? []) out.add(`a verifier runs ${canonicalize(term)}`)
      const terms = (c.evidence ?? []).length
      if (terms > 0) continue // released only with evidence: the verifiers' triples above stand for it
      for (const approving of subsets(Witnesses)) {
        const approvals = approving.flatMap((w) => classes(w).map((k) => ({ witness: w, class: k })))
        if (!satisfies(c.rule, approvals)) continue
        for (const vetoer of [undefined, ...Witnesses]) {
          const vetoed = vetoer !== undefined && classes(vetoer).some((k) => (c.veto ?? []).includes(k))
          if (!vetoed) released(approving, vetoer)
        }
      }
    }
  }
  return out
}

describe("the authority model against brute force", () => {
  it("property: a change widens() calls narrowing lets no triple through that the policy before it refused", () => {
    let narrowing = 0
    fc.assert(
      fc.property(change, ([before, after]) => {
        if (widens([before], [after]).length > 0) return
        narrowing++
        const was = letThrough(activePolicy(0, [before]))
        const now = letThrough(activePolicy(0, [after]))
        const gained = [...now].filter((t) => !was.has(t))
        expect(gained).toEqual([])
      }),
      { numRuns: 600, seed: 35 }
    )
    // The property is not vacuous: many generated changes are narrowing.
    expect(narrowing).toBeGreaterThan(60)
  })

  it("property: a change that lets a triple through that was refused is always a widening (the model is not vacuous)", () => {
    let widenings = 0
    fc.assert(
      fc.property(profile, profile, (before, after) => {
        const was = letThrough(activePolicy(0, [before]))
        const gained = [...letThrough(activePolicy(0, [after]))].some((t) => !was.has(t))
        if (gained) {
          widenings++
          expect(widens([before], [after]).length).toBeGreaterThan(0)
        }
      }),
      { numRuns: 200, seed: 36 }
    )
    expect(widenings).toBeGreaterThan(50)
  })
})

describe("the powers of the organization's contract (human AND fraud) OR breakglass, compliance veto", () => {
  const keyOf = (i: number) => key(i)
  const org: Profile = {
    name: "acme",
    principals: {
      "agent:alice": { keys: [keyOf(0)], classes: ["agent"] },
      "user:carol": { keys: [keyOf(1)], classes: ["human"] },
      "svc:fraud": { keys: [keyOf(2)], classes: ["fraud"] },
      "op:breakglass": { keys: [keyOf(3)], classes: ["breakglass"] },
      "compliance:carl": { keys: [keyOf(4)], classes: ["compliance"] },
      "admin:ops": { keys: [keyOf(5)], classes: ["admin"] },
      "admin:sec": { keys: [keyOf(6)], classes: ["admin"] }
    },
    grants: { "agent:alice": ["money_transfer"] },
    rules: { money_transfer: { amount_field: "amount", witness_above: 1_000, contract: { rule: { any: [{ all: [{ class: "human" }, { class: "fraud" }] }, { class: "breakglass" }] }, veto: ["compliance"] } } },
    admins: ["admin:ops", "admin:sec"]
  }
  const powers = (p: Profile, who: string) => describePowers(authorityOf(activePolicy(0, [p])), who)

  it("each principal's powers: the veto holder vetoes and does not edit; approvers edit; the policy shows no template", () => {
    expect([...powers(org, "compliance:carl")].sort()).toEqual(["acts as class 'compliance' (any contract naming it counts it)", "extends held money_transfer calls", "principal 'compliance:carl' is registered", `signs with key ${keyOf(4)}`, "vetoes money_transfer calls (class 'compliance')"])
    expect(powers(org, "user:carol")).toContain("edits held money_transfer calls")
    expect(powers(org, "compliance:carl")).not.toContain("edits held money_transfer calls")
    expect(powers(org, "admin:ops")).toContain("'admin:ops' applies policy (a narrowing alone, a widening with a second admin)")
    expect(powers(org, Policy)).toEqual([])
  })

  it("case 3: adding a veto class gives its holders a power: a widening", () => {
    const oncall: Profile = { ...org, principals: { ...org.principals, "oncall:olga": { keys: [keyOf(7)], classes: ["oncall"] } } }
    const withVeto: Profile = { ...oncall, rules: { money_transfer: { ...org.rules!["money_transfer"]!, contract: { ...org.rules!["money_transfer"]!.contract!, veto: ["compliance", "oncall"] } } } }
    expect(widens([oncall], [withVeto]).map((w) => `${w.field}: ${w.message}`)).toEqual(["rules.money_transfer.contract.veto: oncall:olga: vetoes money_transfer calls (class 'oncall')"])
  })

  it("case 5: removing the only veto holder takes a protection from everyone else: a widening", () => {
    const { "compliance:carl": _carl, ...rest } = org.principals!
    const withoutCarl: Profile = { ...org, principals: rest }
    expect(widens([org], [withoutCarl]).map((w) => `${w.field}: ${w.message}`)).toEqual([
      "rules.money_transfer.contract.veto: compliance:carl no longer vetoes money_transfer calls (class 'compliance'): a protection of others is lost"
    ])
    // Taking the class away (or every key) is the same loss.
    const classless: Profile = { ...org, principals: { ...org.principals, "compliance:carl": { keys: [keyOf(4)], classes: [] } } }
    expect(widens([org], [classless]).map((w) => w.field)).toEqual(["rules.money_transfer.contract.veto"])
  })

  it("case 6: a presentation template rewrites what witnesses read: adding or changing one is a widening, removing one is not", () => {
    const refund: Profile = { ...org, presentation: { money_transfer: "Refund 9 EUR" } }
    expect(widens([org], [refund]).map((w) => `${w.field}: ${w.message}`)).toEqual(['presentation.money_transfer: witnesses of money_transfer are shown "Refund 9 EUR"'])
    const honest: Profile = { ...org, presentation: { money_transfer: "Transfer {amount} EUR to {to}" } }
    expect(widens([honest], [refund]).map((w) => w.field)).toEqual(["presentation.money_transfer"])
    expect(widens([refund], [org])).toEqual([])
  })

  it("case 7: an evidence term is a query the verifier runs for the organization: adding one is a widening", () => {
    const term: EvidenceTerm = { name: "paid", kind: "sql-readback", by: { class: "fraud" }, params: { connection: "ledger", query: "ROLLBACK; UPDATE accounts SET balance = 1e9" }, expect: { row_count: 1 } }
    const withTerm: Profile = { ...org, rules: { money_transfer: { ...org.rules!["money_transfer"]!, contract: { ...org.rules!["money_transfer"]!.contract!, evidence: [term] } } } }
    expect(widens([org], [withTerm]).map((w) => w.field)).toEqual(["rules.money_transfer.contract.evidence"])
    expect(widens([org], [withTerm])[0]!.message).toContain("verifiers run sql-readback 'paid'")
  })
})

describe("a veto a plugin's contract names", () => {
  it("removing its only holder is a widening too (the contract lives in the plugin's config)", () => {
    const pin = { name: "spend-limit", version: "1.0.0", sha256: "a".repeat(64), signer: "acme", stages: ["adjudicate" as const], config: { rules: { money_transfer: { contract: { rule: { class: "human" }, veto: ["compliance"] } } } } }
    const org: Profile = {
      name: "acme",
      principals: { "agent:alice": { keys: [key(0)], classes: ["agent"] }, "compliance:zoe": { keys: [key(1)], classes: ["compliance"] }, "user:carol": { keys: [key(2)], classes: ["human"] } },
      grants: { "agent:alice": ["money_transfer"] },
      plugins: [pin as never]
    }
    const { "compliance:zoe": _zoe, ...rest } = org.principals!
    expect(widens([org], [{ ...org, principals: rest }]).map((w) => `${w.field}: ${w.message}`)).toEqual([
      "principals.compliance:zoe.classes: compliance:zoe no longer vetoes the calls a plugin holds with a 'compliance' veto: a protection of others is lost"
    ])
  })
})

describe("an identity binding (a bearer token acting as a principal)", () => {
  const binding = { issuer: "https://idp.example.com", audience: "https://wk.example.com/mcp", subject: "alice-agent", principal: "agent:alice" }
  const org: Profile = { name: "acme", principals: { "agent:alice": { keys: [key(0)], classes: ["agent"] } }, grants: { "agent:alice": ["money_transfer"] } }
  it("adding one is a widening that names the principal and the token; removing it narrows", () => {
    expect(widens([org], [{ ...org, identities: [binding] }]).map((w) => `${w.field}: ${w.message}`)).toEqual([
      "identities: agent:alice: acts for bearer tokens of https://idp.example.com for https://wk.example.com/mcp with subject 'alice-agent'"
    ])
    expect(widens([{ ...org, identities: [binding] }], [org])).toEqual([])
    // A group binding is a power of its own: another way in.
    const group = { issuer: binding.issuer, audience: binding.audience, group: "ci", principal: "agent:alice" }
    expect(widens([{ ...org, identities: [binding] }], [{ ...org, identities: [binding, group] }]).map((w) => w.message)).toEqual(["agent:alice: acts for bearer tokens of https://idp.example.com for https://wk.example.com/mcp in group 'ci'"])
  })
})
