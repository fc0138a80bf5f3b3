import { canonicalize } from "../schema/Canonical.js"
import type { EvidenceTerm } from "../schema/EvidenceTerm.js"
import { isReservedTool, type PrincipalEntry, type ToolRule } from "../schema/Profile.js"
import type { PasskeyEntry } from "../schema/Passkey.js"
import { routeAdmits, type WitnessContract } from "../schema/WitnessContract.js"
import { classesOf as ruleClasses, principalsOf as rulePrincipals } from "../heldcall/WitnessRuleEval.js"
import type { ActivePolicy } from "./ActivePolicy.js"
import { templateFor } from "./PresentationTemplate.js"
import { bindingKey, bindingsOf, bindingWhat } from "./IdentityBindings.js"
import { DefaultContract } from "./RuleAdjudicator.js"

/**
 * The authority model: for a policy, every power each principal holds, computed from the merged
 * profiles. Pure: no I/O.
 *
 * A power is something a principal can make happen that the organization's policy must have
 * given it: sign with a key, act under a class (any contract that names the class, a plugin's
 * included, counts it), propose a tool, count toward a tool's contract as an approver (and so edit
 * its held calls, extend them and sign standing grants for it), veto a tool's calls, give a term's
 * evidence, read back an unknown outcome, apply policy, act for an identity provider's bearer tokens. Two powers belong to no principal but to
 * the policy itself (holder `Policy`): the text witnesses are shown for a tool (a template), and
 * each query or command a verifier runs for an evidence term.
 *
 * The powers a contract gives (approve, edit, veto, evidence) are read from the contract a tool's
 * held calls wait on, whether or not a call of the tool is held today: whoever may edit a call
 * when it is held holds that power. A change that makes calls held only narrows (what runs needs
 * more approvals), and an edited call needs the whole contract, approved independently of its
 * editor (runtime/policy/CallDecision.ts), so it runs nothing the agent could not propose.
 *
 * A change is narrowing only when every holder's powers after it are among its powers before it,
 * and nobody loses a power that protects others (a veto). `powerWidenings` lists every way a
 * change breaks that; runtime/policy/Layers.ts adds what the policy requires of every call (rules,
 * contracts, pins, preferences) and together they are `widens`.
 */

/** One power: where it comes from in a profile (a dotted path) and what it lets its holder do. */
export interface Power {
  readonly field: string
  readonly what: string
  /**
   * `protects`: losing it takes a protection from others (a veto), so its loss is a widening too.
   * `describes`: a consequence of powers and requirements compared elsewhere (an approval or
   * evidence that counts only narrows what runs: the contract's requirements are compared by
   * Layers.ts), listed for people but not compared on its own.
   */
  readonly role?: "protects" | "describes"
}

/** The holder of the policy's own powers: what witnesses are shown, what verifiers run. */
export const Policy = "(policy)"

/** Each holder's powers, by a key that names the power exactly. */
export type Authority = ReadonlyMap<string, ReadonlyMap<string, Power>>

/** One way a change gives a holder more than it had, or takes a protection away. */
export interface PowerChange {
  readonly field: string
  readonly message: string
}

// The contract a tool's held calls wait on when the profiles name one (else the default one).
const contractOf = (rule: ToolRule | undefined): WitnessContract => rule?.contract ?? DefaultContract

/** Every class a JSON value names in a `veto` list, at any depth (a plugin's config). */
const vetoClassesIn = (v: unknown): ReadonlyArray<string> => {
  if (v === null || typeof v !== "object") return []
  if (Array.isArray(v)) return v.flatMap(vetoClassesIn)
  return Object.entries(v).flatMap(([k, x]) => (k === "veto" && Array.isArray(x) ? x.filter((c): c is string => typeof c === "string") : vetoClassesIn(x)))
}

// A principal with no key and no passkey signs nothing: no contract counts it.
const signs = (entry: PrincipalEntry): boolean => entry.keys.length > 0 || (entry.passkeys ?? []).length > 0

const termParts = (t: EvidenceTerm): string => canonicalize({ kind: t.kind, params: t.params ?? null, expect: t.expect })

/**
 * A passkey's power: signing with that credential, as registered (its key, algorithm, rp id and
 * origin; a passkey whose key or origin changes is a new power, and so a widening).
 */
const passkeyPower = (pk: PasskeyEntry): string => `passkey:${pk.id}\u0000${canonicalize({ public_key: pk.public_key, alg: pk.alg, rp_id: pk.rp_id, origin: pk.origin })}`

/** Whether a registry entry holds a passkey exactly as registered (same credential, key, rp id and origin). */
export const passkeyHeld = (entry: { readonly passkeys?: ReadonlyArray<PasskeyEntry> | undefined }, pk: PasskeyEntry): boolean =>
  (entry.passkeys ?? []).some((q) => passkeyPower(q) === passkeyPower(pk))

/** Every power of every principal (and of the policy itself) under `policy`. */
export const authorityOf = (policy: ActivePolicy): Authority => {
  const out = new Map<string, Map<string, Power>>()
  const give = (holder: string, key: string, power: Power) => {
    const powers = out.get(holder) ?? new Map<string, Power>()
    powers.set(key, power)
    out.set(holder, powers)
  }
  // A tool nobody may propose has no held calls: its contract gives no one a power.
  const tools = new Set<string>([...policy.grants.values()].flatMap((ts) => [...ts]))
  for (const [name, entry] of policy.principals) {
    give(name, "registered", { field: `principals.${name}`, what: `principal '${name}' is registered` })
    for (const k of entry.keys) give(name, `key:${k}`, { field: `principals.${name}.keys`, what: `signs with key ${k}` })
    for (const pk of entry.passkeys ?? []) give(name, passkeyPower(pk), { field: `principals.${name}.passkeys`, what: `signs attestations with passkey ${pk.id} (${pk.origin})` })
    for (const c of entry.classes) give(name, `class:${c}`, { field: `principals.${name}.classes`, what: `acts as class '${c}' (any contract naming it counts it)` })
  }
  for (const [name, granted] of policy.grants) for (const t of granted) give(name, `propose:${t}`, { field: `grants.${name}`, what: `'${t}' is granted` })
  // A plugin's contracts are in its config: a veto class named there protects like a rule's.
  const pluginVetoes = new Set(policy.profiles.flatMap((p) => (p.plugins ?? []).flatMap((pin) => vetoClassesIn(pin.config))))
  for (const [name, entry] of policy.principals)
    if (signs(entry))
      for (const c of entry.classes.filter((c) => pluginVetoes.has(c)))
        give(name, `veto:plugin:${c}`, { field: `principals.${name}.classes`, what: `vetoes the calls a plugin holds with a '${c}' veto`, role: "protects" })
  // A binding lets whoever holds such a token act as the principal (the MCP endpoint signs for it).
  for (const b of bindingsOf(policy.profiles)) give(b.principal, bindingKey(b), { field: "identities", what: bindingWhat(b) })
  for (const admin of policy.admins) give(admin, "admin", { field: "admins", what: `'${admin}' applies policy (a narrowing alone, a widening with a second admin)` })

  for (const tool of [...tools].sort()) {
    const rule = policy.rules.get(tool)
    const contract = contractOf(rule)
    const field = `rules.${tool}.contract`
    const approverRules = [contract.rule, ...(contract.fallback?.action === "route" ? [contract.fallback.rule] : [])]
    const approverClasses = new Set(approverRules.flatMap(ruleClasses))
    const approverNames = new Set(approverRules.flatMap(rulePrincipals))
    const veto = new Set(contract.veto ?? [])
    for (const [name, entry] of policy.principals) {
      if (!signs(entry)) continue
      const as = entry.classes.filter((c) => approverClasses.has(c))
      if (as.length > 0 || approverNames.has(name)) {
        const how = as.length > 0 ? `as ${as.join(", ")}` : "by name"
        give(name, `approve:${tool}`, { field, what: `its approval counts for ${tool} (${how})`, role: "describes" })
        // An edit is a new proposal of the editor's: only an approver may make one, never of a kernel tool.
        // A passkey signs attestations only: edits, standing approvals and extensions need an ed25519 key.
        if (!isReservedTool(tool) && entry.keys.length > 0) give(name, `edit:${tool}`, { field, what: `edits held ${tool} calls` })
        if (entry.keys.length > 0) give(name, `standing:${tool}`, { field, what: `signs standing approvals of ${tool} calls`, role: "describes" })
      }
      // Extending a held call's expiry is open to every witness the contract admits, vetoes included.
      if (entry.keys.length > 0 && (as.length > 0 || approverNames.has(name) || entry.classes.some((c) => veto.has(c))))
        give(name, `extend:${tool}`, { field, what: `extends held ${tool} calls`, role: "describes" })
      for (const c of entry.classes.filter((c) => veto.has(c)))
        give(name, `veto:${tool}`, { field: `${field}.veto`, what: `vetoes ${tool} calls (class '${c}')`, role: "protects" })
      for (const term of contract.evidence ?? [])
        if (routeAdmits(term.by, name, entry.classes)) give(name, `evidence:${tool}:${term.name}`, { field: `${field}.evidence`, what: `gives evidence '${term.name}' for ${tool}`, role: "describes" })
      const rb = rule?.readback_witnesses
      if (rb !== undefined && ((rb.principals ?? []).includes(name) || entry.classes.some((c) => (rb.classes ?? []).includes(c))))
        give(name, `readback:${tool}`, { field: `rules.${tool}.readback_witnesses`, what: `settles unknown outcomes of ${tool}` })
    }
    const template = templateFor(policy.profiles, tool)
    if (template !== undefined) give(Policy, `shown:${tool}:${template}`, { field: `presentation.${tool}`, what: `witnesses of ${tool} are shown ${JSON.stringify(template)}` })
    for (const term of contract.evidence ?? [])
      give(Policy, `verify:${tool}:${term.name}:${termParts(term)}`, { field: `${field}.evidence`, what: `verifiers run ${term.kind} '${term.name}' for ${tool} with ${canonicalize(term.params ?? {})}` })
  }
  return out
}

/**
 * Every way `after` gives a holder a power it did not hold under `before`, or takes a protecting
 * power (a veto) from a holder that had it. Empty: every holder's powers after are a subset of
 * its powers before, and no protection is lost.
 */
export const powerWidenings = (before: Authority, after: Authority): ReadonlyArray<PowerChange> => {
  const out: Array<PowerChange> = []
  const seen = new Set<string>()
  const add = (field: string, message: string) => {
    const k = `${field}\u0000${message}`
    if (!seen.has(k)) out.push({ field, message }), seen.add(k)
  }
  const holders = [...new Set([...before.keys(), ...after.keys()])].sort()
  for (const holder of holders) {
    const b = before.get(holder) ?? new Map<string, Power>()
    const a = after.get(holder) ?? new Map<string, Power>()
    const who = holder === Policy ? "" : `${holder}: `
    for (const [key, p] of [...a].sort(byRank)) if (p.role !== "describes" && !b.has(key)) add(p.field, gainedMessage(holder, key, p, who))
    for (const [key, p] of [...b].sort(([x], [y]) => (x < y ? -1 : 1))) if (p.role === "protects" && !a.has(key)) add(p.field, `${holder} no longer ${p.what}: a protection of others is lost`)
  }
  return out
}

// A holder's powers in the order people read them: who it is, how it signs, what it is, then what it may do.
const Rank = ["registered", "key:", "passkey:", "class:", "propose:", "admin"]
const rankOf = (key: string) => {
  const i = Rank.findIndex((r) => key.startsWith(r))
  return i === -1 ? Rank.length : i
}
const byRank = ([x]: readonly [string, Power], [y]: readonly [string, Power]) => rankOf(x) - rankOf(y) || (x < y ? -1 : x > y ? 1 : 0)

// The messages the kernel has always given for a new principal, key, class, grant or admin.
const gainedMessage = (holder: string, key: string, p: Power, who: string): string => {
  if (key === "registered") return `principal '${holder}' is added`
  if (key.startsWith("key:")) return `key ${key.slice(4)} is added`
  if (key.startsWith("passkey:")) return `passkey ${key.slice(8).split("\u0000")[0]} is added`
  if (key.startsWith("class:")) return `class '${key.slice(6)}' is added`
  if (key.startsWith("propose:")) return p.what
  if (key === "admin") return `admin '${holder}' is added`
  return `${who}${p.what}`
}

/** A holder's powers as lines, for `wk policy explain` and the inbox. */
export const describePowers = (authority: Authority, holder: string): ReadonlyArray<string> =>
  [...(authority.get(holder) ?? new Map<string, Power>()).values()].map((p) => p.what)
