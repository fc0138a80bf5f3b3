import type { Preferences } from "../schema/Preferences.js"
import { termKey } from "../schema/EvidenceTerm.js"
import type { Profile, ToolRule } from "../schema/Profile.js"
import type { WitnessContract, WitnessRule } from "../schema/WitnessContract.js"
import { missingConjuncts } from "../schema/WitnessRule.js"
import { pinIdentity, pinLabel, resolvePin, scopeDropped, type PluginPin } from "../schema/PluginPin.js"
import { canonicalize } from "../schema/Canonical.js"
import { activePolicy, isNarrowingProfile, tiersOf, type ActivePolicy } from "./ActivePolicy.js"
import { DefaultContract } from "./RuleAdjudicator.js"
import { layerPreferences } from "./Preferences.js"
import { authorityOf, passkeyHeld, powerWidenings } from "./Authority.js"
import { bindingKey, bindingsOf } from "./IdentityBindings.js"

/**
 * Layer validation and widening detection. Pure: no I/O.
 *
 * Layers stack `floor + organization + project + user`. Floor and organization profiles (and
 * profiles with no `layer`, treated as organization) set authority. A `project` profile may
 * only narrow what floor and organization set; a `user` profile may only narrow or route
 * (preferences, stricter rules) what floor, organization and project set. Neither may add a
 * grant the layers below do not already give that principal, register principals, keys or
 * classes, add admins, or loosen a threshold, a rule or a preference. Adding plugin pins is
 * allowed at every layer: a project or user pin can only keep or narrow an outcome (its ALLOW
 * is no opinion and its contract is added; runtime/policy/Fold.ts).
 *
 * `widens(before, after)` compares two whole profile sets (what `policy.apply` would change);
 * a non-empty answer means the change needs a witnessed policy change.
 */

/** One way a change makes policy looser: the field (a dotted path) and why. */
export interface Widening {
  readonly field: string
  readonly message: string
}

/** A narrow-only layer that widens a lower layer; `message` is the one-line error. */
export interface LayerError {
  readonly layer: "project" | "user"
  readonly profile: string
  readonly field: string
  readonly message: string
}

const LayerRank = { floor: 0, organization: 1, project: 2, user: 3 } as const
type LayerName = keyof typeof LayerRank

/** The layer a profile belongs to; a profile without `layer` is an organization profile. */
export const layerOf = (p: Profile): LayerName => p.layer ?? "organization"

/** A value's canonical JSON, for comparing two values; an absent value is the empty string. */
const stable = (v: unknown): string => (v === undefined ? "" : canonicalize(v))
// A route's conjuncts: `all` nodes flattened, as canonical JSON (a route admits a witness when every conjunct does).
const conjuncts = (r: WitnessRule): ReadonlyArray<string> => ("all" in r ? r.all.flatMap(conjuncts) : [stable(r)])

const contractWidenings = (field: string, before: WitnessContract | undefined, after: WitnessContract | undefined): Array<Widening> => {
  if (before === undefined) return []
  if (after === undefined) return [{ field, message: "the witness contract is removed" }]
  const out: Array<Widening> = []
  const missing = missingConjuncts(before.rule, after.rule)
  if (missing.length > 0) out.push({ field: `${field}.rule`, message: `the witness rule no longer requires ${missing.join(", ")}` })
  const veto = new Set(after.veto ?? [])
  for (const v of before.veto ?? []) if (!veto.has(v)) out.push({ field: `${field}.veto`, message: `veto class '${v}' is dropped` })
  const terms = new Set((after.evidence ?? []).map(termKey))
  for (const t of before.evidence ?? []) if (!terms.has(termKey(t))) out.push({ field: `${field}.evidence`, message: `evidence term '${t.name}' (${t.kind}) is dropped or changed` })
  const fb = after.fallback
  if (fb !== undefined && fb.action === "route" && stable(fb) !== stable(before.fallback)) out.push({ field: `${field}.fallback`, message: "a routing fallback is added or changed" })
  return out
}

const looserThreshold = (b: number | undefined, a: number | undefined): boolean => b !== undefined && (a === undefined || a > b)

/** How `after` loosens `before` for one tool's rule (undefined after: the rule is removed), its contract aside (`ruleContractWidenings`). */
const ruleWidenings = (tool: string, before: ToolRule | undefined, after: ToolRule | undefined): ReadonlyArray<Widening> => {
  if (before === undefined) return []
  const f = `rules.${tool}`
  if (after === undefined) return [{ field: f, message: `the rule for '${tool}' is removed` }]
  const out: Array<Widening> = []
  if (before.amount_field !== undefined && after.amount_field !== undefined && after.amount_field !== before.amount_field)
    out.push({ field: `${f}.amount_field`, message: `amount_field '${after.amount_field}' replaces '${before.amount_field}'` })
  if (looserThreshold(before.witness_above, after.witness_above))
    out.push({ field: `${f}.witness_above`, message: `witness_above ${after.witness_above ?? "removed"} is looser than ${before.witness_above}` })
  if (looserThreshold(before.deny_above, after.deny_above))
    out.push({ field: `${f}.deny_above`, message: `deny_above ${after.deny_above ?? "removed"} is looser than ${before.deny_above}` })
  if (before.always_witness === true && after.always_witness !== true) out.push({ field: `${f}.always_witness`, message: "always_witness is dropped" })
  return out
}

/**
 * How the contracts the rules for `tool` name loosen. The floor and organization rule's contract
 * stands in for the default one whenever a call of the tool is held, whoever holds it, so a
 * contract named for the first time is compared with the default one; the project and user
 * rule's contract is added to whatever else applies. Each is compared with its own earlier self.
 */
const ruleContractWidenings = (tool: string, b: ActivePolicy, a: ActivePolicy): ReadonlyArray<Widening> => {
  const field = `rules.${tool}.contract`
  const [bt, at] = [tiersOf(b), tiersOf(a)]
  const own = { before: bt.authorityRules.get(tool)?.contract, after: at.authorityRules.get(tool)?.contract }
  const narrowing = { before: bt.narrowingRules.get(tool)?.contract, after: at.narrowingRules.get(tool)?.contract }
  return [
    ...(own.before === undefined && own.after === undefined ? [] : contractWidenings(field, own.before ?? DefaultContract, own.after)),
    ...(narrowing.before === undefined ? [] : contractWidenings(field, narrowing.before, narrowing.after))
  ]
}

const DisclosureOrder = ["exact", "redacted"]
const PostureOrder = ["auto", "preview"]
const SubstitutionOrder = ["allow", "preview", "forbid"]
// A later value is looser when unset (where the earlier was set) or earlier in its order.
const looserIn = (order: ReadonlyArray<string>, b: string | undefined, a: string | undefined) => b !== undefined && (a === undefined || order.indexOf(a) < order.indexOf(b))

/** How preferences `after` loosen preferences `before` (both merged for one principal key). */
export const preferenceWidenings = (field: string, before: Preferences, after: Preferences): ReadonlyArray<Widening> => {
  const out: Array<Widening> = []
  const add = (k: string, message: string) => out.push({ field: `${field}.${k}`, message })
  if (before.require_witness === true && after.require_witness !== true) add("require_witness", "require_witness is dropped")
  if (before.cancel_on_disconnect === true && after.cancel_on_disconnect !== true) add("cancel_on_disconnect", "cancel_on_disconnect is dropped")
  const always = new Set(after.always_witness ?? [])
  for (const t of before.always_witness ?? []) if (!always.has(t)) add("always_witness", `always_witness '${t}' is dropped`)
  if (looserThreshold(before.expires_in_ms, after.expires_in_ms)) add("expires_in_ms", `expires_in_ms ${after.expires_in_ms ?? "removed"} is longer than ${before.expires_in_ms}`)
  if (looserIn(DisclosureOrder, before.disclosure, after.disclosure)) add("disclosure", `disclosure '${after.disclosure ?? "unset"}' discloses more than '${before.disclosure}'`)
  for (const k of ["canonicalize", "rewrite"] as const)
    if (looserIn(PostureOrder, before.transforms?.[k], after.transforms?.[k])) add(`transforms.${k}`, `transforms.${k} '${after.transforms?.[k] ?? "unset"}' is looser than '${before.transforms?.[k]}'`)
  if (looserIn(SubstitutionOrder, before.transforms?.substitution, after.transforms?.substitution))
    add("transforms.substitution", `transforms.substitution '${after.transforms?.substitution ?? "unset"}' is looser than '${before.transforms?.substitution}'`)
  if (before.witness_route !== undefined) {
    const has = new Set(after.witness_route ? conjuncts(after.witness_route) : [])
    const missing = conjuncts(before.witness_route).filter((c) => !has.has(c))
    if (missing.length > 0) add("witness_route", `witness_route no longer requires ${missing.join(", ")}`)
  }
  return out
}

const depthOf = (profiles: ReadonlyArray<Profile>): number | undefined =>
  profiles.reduce<number | undefined>((m, p) => (p.max_dependency_depth === undefined ? m : m === undefined ? p.max_dependency_depth : Math.min(m, p.max_dependency_depth)), undefined)

// The pins of one tier (floor and organization, or project and user) by canonical form.
const pinsOf = (profiles: ReadonlyArray<Profile>, narrowing: boolean): ReadonlyMap<string, PluginPin> =>
  new Map(profiles.filter((p) => isNarrowingProfile(p) === narrowing).flatMap((p) => (p.plugins ?? []).map((pin) => [pinIdentity(pin), pin] as const)))

// What differs between two pins of one plugin, named the way the pin schema names it.
const pinDiff = (b: PluginPin, a: PluginPin): ReadonlyArray<string> => {
  const rb = resolvePin(b) as unknown as Record<string, unknown>
  const ra = resolvePin(a) as unknown as Record<string, unknown>
  const identity = ["name", "version", "sha256", "signer"].some((k) => rb[k] !== ra[k]) ? ["identity (version, sha256 or signer)"] : []
  return [...identity, ...Object.keys(rb).filter((k) => !["name", "version", "sha256", "signer"].includes(k) && stable(rb[k]) !== stable(ra[k]))]
}

/**
 * How the plugin pins of `after` may loosen those of `before`. Any pin that changes (identity,
 * config, stages, capabilities, egress, limits, fallback, precedence) or goes away is a
 * widening: a pin's outcome cannot be compared without running it on every call. A new pin at a
 * project or user layer only narrows (runtime/policy/Fold.ts, role `narrowing`). A new floor
 * or organization pin widens when it can lift the floor (adjudicate, while another such plugin
 * already adjudicates: before it, the grant alone allowed), change the call (transform) or name
 * a contract that stands in for the default (adjudicate and witness_contract); admission and
 * observer pins only narrow.
 */
const pinWidenings = (before: ReadonlyArray<Profile>, after: ReadonlyArray<Profile>): ReadonlyArray<Widening> => {
  const out: Array<Widening> = []
  for (const narrowing of [false, true]) {
    const b = pinsOf(before, narrowing)
    const a = pinsOf(after, narrowing)
    const where = narrowing ? "a project or user layer" : "the floor or organization layer"
    const gone = [...b].filter(([k]) => !a.has(k)).map(([, pin]) => pin)
    const added = [...a].filter(([k]) => !b.has(k)).map(([, pin]) => pin)
    const changed = new Set<string>()
    for (const pin of gone) {
      const next = added.find((x) => x.name === pin.name)
      if (next === undefined) out.push({ field: `plugins.${pin.name}`, message: `plugin ${pinLabel(pin)} is unpinned from ${where}` })
      else {
        changed.add(pin.name)
        const diff = pinDiff(pin, next)
        const dropped = scopeDropped(resolvePin(pin).tools, resolvePin(next).tools)
        // A pin that stops applying to a tool no longer checks its calls: always a widening.
        if (dropped.length > 0) out.push({ field: `plugins.${pin.name}.tools`, message: `plugin ${pinLabel(pin)} at ${where} stops applying to ${dropped.join(", ")}` })
        const others = diff.filter((k) => k !== "tools")
        if (others.length > 0) out.push({ field: `plugins.${pin.name}`, message: `plugin ${pinLabel(pin)} at ${where} changes its ${others.join(", ")}` })
        // Applying to more tools only narrows where the pin only narrows: an admission or observer
        // pin, or any pin of a project or user layer. A floor or organization pin that adjudicates,
        // transforms or provides contracts reaches calls it did not reach before.
        else if (dropped.length === 0 && diff.includes("tools") && !narrowing && pin.stages.some((st) => st === "adjudicate" || st === "transform" || st === "witness_contract"))
          out.push({ field: `plugins.${pin.name}.tools`, message: `plugin ${pinLabel(pin)} at ${where} applies to more tools (${resolvePin(next).tools.join(", ")}): it can allow, change or hold calls it did not reach` })
      }
    }
    if (narrowing) continue
    const adjudicatedBefore = [...b.values()].some((pin) => pin.stages.includes("adjudicate"))
    for (const pin of added) {
      if (changed.has(pin.name)) continue
      const field = `plugins.${pin.name}`
      if (pin.stages.includes("adjudicate"))
        out.push({
          field,
          message: adjudicatedBefore
            ? `plugin ${pinLabel(pin)} is pinned at ${where} to adjudicate: it can allow a call every other adjudicator defers on`
            : `plugin ${pinLabel(pin)} is pinned at ${where} to adjudicate: the contract it holds a call with can stand in for the default one`
        })
      if (pin.stages.includes("transform")) out.push({ field, message: `plugin ${pinLabel(pin)} is pinned at ${where} to transform: it changes the call that runs` })
      if (pin.stages.includes("witness_contract")) out.push({ field, message: `plugin ${pinLabel(pin)} is pinned at ${where} to provide witness contracts: its contract can stand in for the default one` })
    }
  }
  return out
}

/** Every way the merged policy of `after` is looser than that of `before`. Empty: `after` only narrows. */
export const widens = (before: ReadonlyArray<Profile>, after: ReadonlyArray<Profile>): ReadonlyArray<Widening> => {
  const b = activePolicy(0, before)
  const a = activePolicy(0, after)
  // Each principal's powers (and the policy's own: what witnesses are shown, what verifiers run).
  const out: Array<Widening> = [...powerWidenings(authorityOf(b), authorityOf(a))]
  // Without its namespace a principal that acted for another may witness its calls.
  for (const [name, entry] of a.principals) {
    const had = b.principals.get(name)
    if (had?.namespace !== undefined && entry.namespace !== had.namespace) out.push({ field: `principals.${name}.namespace`, message: `namespace '${had.namespace}' is ${entry.namespace === undefined ? "dropped" : `changed to '${entry.namespace}'`}` })
  }
  for (const tool of [...new Set([...b.rules.keys(), ...a.rules.keys()])].sort()) out.push(...ruleWidenings(tool, b.rules.get(tool), a.rules.get(tool)), ...ruleContractWidenings(tool, b, a))
  if (a.heldTtlMs > b.heldTtlMs) out.push({ field: "held_ttl_ms", message: `held_ttl_ms ${a.heldTtlMs} is longer than ${b.heldTtlMs}` })
  const bd = depthOf(before)
  const ad = depthOf(after)
  if (looserThreshold(bd, ad)) out.push({ field: "max_dependency_depth", message: `max_dependency_depth ${ad ?? "removed"} is deeper than ${bd}` })
  out.push(...pinWidenings(before, after))
  const keys = new Set(before.flatMap((p) => Object.keys(p.preferences ?? {})))
  for (const key of [...keys].sort()) out.push(...preferenceWidenings(`preferences.${key}`, prefsFor(b, key), prefsFor(a, key)))
  return out
}

// "*" is its own key: its merged entry is what every principal gets.
const prefsFor = (policy: ActivePolicy, key: string): Preferences => layerPreferences(policy, key).preferences

const names = (ps: ReadonlyArray<Profile>, layer: LayerName) => ps.filter((p) => layerOf(p) === layer).map((p) => `'${p.name}'`)

/** How one narrow-only profile widens the layers below it (`base`). */
const layerWidenings = (base: ReadonlyArray<Profile>, p: Profile): ReadonlyArray<Widening> => {
  const b = activePolicy(0, base)
  const out: Array<Widening> = []
  const orgs = names(base, "organization")
  const by = orgs.length > 0 ? `organization ${orgs.join(", ")}` : "the kernel floor"
  for (const [principal, tools] of Object.entries(p.grants ?? {})) {
    for (const t of tools) if (!(b.grants.get(principal)?.has(t) ?? false)) out.push({ field: `grants.${principal}`, message: `'${t}' is not granted by ${by}` })
  }
  for (const [name, entry] of Object.entries(p.principals ?? {})) {
    const had = b.principals.get(name)
    if (had === undefined) {
      out.push({ field: `principals.${name}`, message: `principal '${name}' is not registered by ${by}` })
      continue
    }
    for (const k of entry.keys) if (!had.keys.includes(k)) out.push({ field: `principals.${name}.keys`, message: `key ${k} is not registered by ${by}` })
    for (const pk of entry.passkeys ?? []) if (!passkeyHeld(had, pk)) out.push({ field: `principals.${name}.passkeys`, message: `passkey ${pk.id} is not registered by ${by}` })
    for (const c of entry.classes) if (!had.classes.includes(c)) out.push({ field: `principals.${name}.classes`, message: `class '${c}' is not given by ${by}` })
  }
  // A binding lets bearer tokens of an issuer act as a principal: only the organization names who may.
  const held = new Set(bindingsOf(b.profiles).map((x) => `${x.principal} ${bindingKey(x)}`))
  for (const [i, x] of (p.identities ?? []).entries())
    if (!held.has(`${x.principal} ${bindingKey(x)}`)) out.push({ field: `identities.${i}`, message: `identity binding of ${x.issuer} ${"subject" in x ? `subject '${x.subject}'` : `group '${x.group}'`} to ${x.principal} is not bound by ${by}` })
  for (const admin of p.admins ?? []) if (!b.admins.has(admin)) out.push({ field: "admins", message: `admin '${admin}' is not an admin of ${by}` })
  for (const [tool, rule] of Object.entries(p.rules ?? {})) {
    const had = b.rules.get(tool)
    if (had === undefined) continue
    // The layer's own rule is joined with the ones below, so only explicit loosening is an error.
    if (rule.amount_field !== undefined && had.amount_field !== undefined && rule.amount_field !== had.amount_field)
      out.push({ field: `rules.${tool}.amount_field`, message: `amount_field '${rule.amount_field}' replaces '${had.amount_field}'` })
    if (rule.witness_above !== undefined && had.witness_above !== undefined && rule.witness_above > had.witness_above)
      out.push({ field: `rules.${tool}.witness_above`, message: `witness_above ${rule.witness_above} is looser than ${had.witness_above}` })
    if (rule.deny_above !== undefined && had.deny_above !== undefined && rule.deny_above > had.deny_above)
      out.push({ field: `rules.${tool}.deny_above`, message: `deny_above ${rule.deny_above} is looser than ${had.deny_above}` })
    if (rule.always_witness === false && had.always_witness === true) out.push({ field: `rules.${tool}.always_witness`, message: "always_witness false would drop a witness" })
    const fb = rule.contract?.fallback
    if (fb !== undefined && fb.action === "route" && stable(fb) !== stable(had.contract?.fallback)) out.push({ field: `rules.${tool}.contract.fallback`, message: "a routing fallback is added or changed" })
  }
  if (p.held_ttl_ms !== undefined && p.held_ttl_ms > b.heldTtlMs) out.push({ field: "held_ttl_ms", message: `held_ttl_ms ${p.held_ttl_ms} is longer than ${b.heldTtlMs}` })
  // A transform changes the call that runs: it can steer a call to a granted tool whose rule is
  // looser than the one the agent's call meets, so only the floor and the organization pin one.
  for (const [i, pin] of (p.plugins ?? []).entries())
    if (pin.stages.includes("transform")) out.push({ field: `plugins.${i}.stages`, message: `plugin ${pin.name} may not transform at a narrowing layer: a transform changes the call that runs` })
  const bd = depthOf(base)
  if (p.max_dependency_depth !== undefined && bd !== undefined && p.max_dependency_depth > bd)
    out.push({ field: "max_dependency_depth", message: `max_dependency_depth ${p.max_dependency_depth} is deeper than ${bd}` })
  for (const [key, prefs] of Object.entries(p.preferences ?? {})) out.push(...explicitPreferenceWidenings(`preferences.${key}`, prefsFor(b, key), prefs))
  return out
}

// A layer's own preferences are merged stricter-wins; only a value explicitly looser is an error.
const explicitPreferenceWidenings = (field: string, below: Preferences, own: Preferences): ReadonlyArray<Widening> => {
  const out: Array<Widening> = []
  const add = (k: string, message: string) => out.push({ field: `${field}.${k}`, message })
  if (own.require_witness === false && below.require_witness === true) add("require_witness", "require_witness false would drop a required witness")
  if (own.cancel_on_disconnect === false && below.cancel_on_disconnect === true) add("cancel_on_disconnect", "cancel_on_disconnect false would keep a call a lower layer cancels")
  if (own.expires_in_ms !== undefined && below.expires_in_ms !== undefined && own.expires_in_ms > below.expires_in_ms)
    add("expires_in_ms", `expires_in_ms ${own.expires_in_ms} is longer than ${below.expires_in_ms}`)
  if (own.disclosure !== undefined && looserIn(DisclosureOrder, below.disclosure, own.disclosure)) add("disclosure", `disclosure '${own.disclosure}' discloses more than '${below.disclosure}'`)
  for (const k of ["canonicalize", "rewrite"] as const)
    if (own.transforms?.[k] !== undefined && looserIn(PostureOrder, below.transforms?.[k], own.transforms[k])) add(`transforms.${k}`, `transforms.${k} '${own.transforms[k]}' is looser than '${below.transforms?.[k]}'`)
  const sub = own.transforms?.substitution
  if (sub !== undefined && looserIn(SubstitutionOrder, below.transforms?.substitution, sub)) add("transforms.substitution", `transforms.substitution '${sub}' is looser than '${below.transforms?.substitution}'`)
  return out
}

/**
 * Checks that every `project` profile only narrows floor and organization, and every `user`
 * profile only narrows or routes floor, organization and project. Empty: the set is valid.
 * Errors read `user layer 'carol-prefs' widens grants.agent:alice: 'wire_transfer' is not granted by organization 'acme-org'`.
 */
export const checkLayers = (profiles: ReadonlyArray<Profile>): ReadonlyArray<LayerError> => {
  const out: Array<LayerError> = []
  for (const p of profiles) {
    const layer = layerOf(p)
    if (layer !== "project" && layer !== "user") continue
    const base = profiles.filter((q) => LayerRank[layerOf(q)] < LayerRank[layer])
    for (const w of layerWidenings(base, p)) out.push({ layer, profile: p.name, field: w.field, message: `${layer} layer '${p.name}' widens ${w.field}: ${w.message}` })
  }
  return out
}
