import { pinIdentity, type PluginPin } from "../schema/PluginPin.js"
import { joinTerms } from "../schema/EvidenceTerm.js"
import type { WitnessContract } from "../schema/WitnessContract.js"
import { joinRules } from "../schema/WitnessRule.js"
import type { PrincipalEntry, Profile, ToolRule } from "../schema/Profile.js"
import { jcsDigest } from "../schema/Canonical.js"
import type { WitnessRegistry } from "../heldcall/Counting.js"
import type { DecideContext } from "../heldcall/Decide.js"
import { maxDependencyDepth } from "../heldcall/Dependencies.js"

/** The policy in force: merged profiles, the epoch they were applied at, and lookups over them. */
export interface ActivePolicy {
  readonly epoch: number
  readonly digest: string
  readonly profiles: ReadonlyArray<Profile>
  readonly principals: ReadonlyMap<string, PrincipalEntry>
  readonly grants: ReadonlyMap<string, ReadonlySet<string>>
  readonly rules: ReadonlyMap<string, ToolRule>
  readonly heldTtlMs: number
  readonly admins: ReadonlySet<string>
}

export const DefaultHeldTtlMs = 60 * 60 * 1000

/**
 * Merges profiles into one policy. Principals and their keys are the union; a tool grant must
 * appear in some profile (the kernel floor grants nothing); rules keep the stricter threshold.
 */
export const activePolicy = (epoch: number, profiles: ReadonlyArray<Profile>): ActivePolicy => {
  const principals = new Map<string, PrincipalEntry>()
  const grants = new Map<string, Set<string>>()
  const admins = new Set<string>()
  let heldTtlMs = DefaultHeldTtlMs
  for (const p of profiles) {
    for (const [name, entry] of Object.entries(p.principals ?? {})) {
      const prev = principals.get(name)
      // A namespace named anywhere binds the principal (one is enough to make it dependent).
      const namespace = prev?.namespace ?? entry.namespace
      const passkeys = prev ? mergePasskeys(prev.passkeys, entry.passkeys) : entry.passkeys
      principals.set(name, prev ? { keys: [...new Set([...prev.keys, ...entry.keys])], classes: [...new Set([...prev.classes, ...entry.classes])], ...(passkeys !== undefined ? { passkeys } : {}), ...(namespace !== undefined ? { namespace } : {}) } : entry)
    }
    for (const [name, tools] of Object.entries(p.grants ?? {})) {
      const set = grants.get(name) ?? new Set<string>()
      for (const t of tools) set.add(t)
      grants.set(name, set)
    }
    for (const a of p.admins ?? []) admins.add(a)
    if (p.held_ttl_ms !== undefined) heldTtlMs = Math.min(heldTtlMs, p.held_ttl_ms)
  }
  return { epoch, digest: jcsDigest(profiles), profiles, principals, grants, rules: mergeRules(profiles), heldTtlMs, admins }
}

// Passkeys named by any profile, each credential (id and key) once.
const mergePasskeys = (a: PrincipalEntry["passkeys"], b: PrincipalEntry["passkeys"]): PrincipalEntry["passkeys"] => {
  if (a === undefined || b === undefined) return a ?? b
  const out = [...a]
  for (const p of b) if (!out.some((q) => q.id === p.id && q.public_key === p.public_key)) out.push(p)
  return out
}

/** Each tool's rule across `profiles`, merged: the stricter threshold wins, contracts are joined (`joinRules`). */
export const mergeRules = (profiles: ReadonlyArray<Profile>): ReadonlyMap<string, ToolRule> => {
  const rules = new Map<string, ToolRule>()
  for (const p of profiles) for (const [tool, rule] of Object.entries(p.rules ?? {})) rules.set(tool, stricter(rules.get(tool), rule))
  return rules
}

/**
 * Whether a profile belongs to a narrow-only layer (`project`, `user`). Floor and organization
 * profiles (and profiles with no `layer`) set authority; the others can only narrow it.
 */
export const isNarrowingProfile = (p: Profile): boolean => p.layer === "project" || p.layer === "user"

/** The policy split by what its parts may do (see runtime/policy/Fold.ts, `Role`). */
export interface Tiers {
  /** Rules of the floor and organization layers, merged. */
  readonly authorityRules: ReadonlyMap<string, ToolRule>
  /** Rules of the project and user layers, merged. */
  readonly narrowingRules: ReadonlyMap<string, ToolRule>
  /** Canonical forms of the pins a floor or organization profile holds. */
  readonly authorityPins: ReadonlySet<string>
  /** Whether a floor or organization profile pins an adjudicate-stage plugin (else the grant allows). */
  readonly authorityAdjudicates: boolean
}

// An ActivePolicy is immutable: its tiers are computed once.
const tierCache = new WeakMap<ActivePolicy, Tiers>()

/** The policy's tiers (cached per policy). */
export const tiersOf = (policy: ActivePolicy): Tiers => {
  const hit = tierCache.get(policy)
  if (hit !== undefined) return hit
  const authority = policy.profiles.filter((p) => !isNarrowingProfile(p))
  const pins: ReadonlyArray<PluginPin> = authority.flatMap((p) => p.plugins ?? [])
  const tiers: Tiers = {
    authorityRules: mergeRules(authority),
    narrowingRules: mergeRules(policy.profiles.filter(isNarrowingProfile)),
    authorityPins: new Set(pins.map(pinIdentity)),
    authorityAdjudicates: pins.some((pin) => pin.stages.includes("adjudicate"))
  }
  tierCache.set(policy, tiers)
  return tiers
}

/** Whether only project or user profiles pin this plugin: its ALLOW is no opinion, its contract is added. */
export const isNarrowingPin = (policy: ActivePolicy, pin: PluginPin): boolean => !tiersOf(policy).authorityPins.has(pinIdentity(pin))

const minDefined = (a: number | undefined, b: number | undefined): number | undefined =>
  a === undefined ? b : b === undefined ? a : Math.min(a, b)

/** Two rules' contracts for one tool: both rules, both sets of vetoes and evidence terms. */
const joinedRuleContract = (a: WitnessContract, b: WitnessContract): WitnessContract => {
  const evidence = joinTerms([a.evidence, b.evidence])
  return { rule: joinRules([a.rule, b.rule]), veto: [...new Set([...(a.veto ?? []), ...(b.veto ?? [])])], ...(evidence !== undefined ? { evidence } : {}) }
}

const stricter = (a: ToolRule | undefined, b: ToolRule): ToolRule =>
  a === undefined
    ? b
    : {
        amount_field: a.amount_field ?? b.amount_field,
        witness_above: minDefined(a.witness_above, b.witness_above),
        deny_above: minDefined(a.deny_above, b.deny_above),
        always_witness: (a.always_witness ?? false) || (b.always_witness ?? false),
        contract: a.contract && b.contract ? joinedRuleContract(a.contract, b.contract) : (a.contract ?? b.contract),
        // Idempotent only if no profile says otherwise; read-back witnesses named by any profile.
        ...(a.idempotent !== undefined || b.idempotent !== undefined ? { idempotent: a.idempotent !== false && b.idempotent !== false } : {}),
        // Without read-back if any profile says the tool has none.
        ...(a.readback !== undefined || b.readback !== undefined ? { readback: a.readback !== false && b.readback !== false } : {}),
        ...(a.readback_witnesses !== undefined || b.readback_witnesses !== undefined
          ? {
              readback_witnesses: {
                classes: [...new Set([...(a.readback_witnesses?.classes ?? []), ...(b.readback_witnesses?.classes ?? [])])],
                principals: [...new Set([...(a.readback_witnesses?.principals ?? []), ...(b.readback_witnesses?.principals ?? [])])]
              }
            }
          : {})
      }

/** Classes a principal is registered with (empty when unknown). */
export const classesOf = (policy: ActivePolicy, principal: string): ReadonlyArray<string> => policy.principals.get(principal)?.classes ?? []

/** Every key a principal signs with: its ed25519 keys and its passkeys' COSE public keys (an envelope's `key`). */
export const keysOf = (policy: ActivePolicy, principal: string): ReadonlyArray<string> => {
  const entry = policy.principals.get(principal)
  if (entry === undefined) return []
  return entry.passkeys === undefined || entry.passkeys.length === 0 ? entry.keys : [...entry.keys, ...entry.passkeys.map((p) => p.public_key)]
}

/** The policy's principals as the pure core sees them: classes, keys, and who is registered. */
export const registryOf = (policy: ActivePolicy): WitnessRegistry => ({
  classesOf: (p) => classesOf(policy, p),
  keysOf: (p) => keysOf(policy, p),
  principals: () => [...policy.principals.keys()],
  namespaceOf: (p) => policy.principals.get(p)?.namespace
})

/** What a decider knows of `policy` at `now` (heldcall/Decide.ts). */
export const decideContextOf = (policy: ActivePolicy, now: number): DecideContext => ({
  ...registryOf(policy),
  now,
  isAdmin: (p) => policy.admins.has(p),
  readbackWitnesses: (tool) => policy.rules.get(tool)?.readback_witnesses,
  maxDependencyDepth: () => maxDependencyDepth(policy.profiles),
  heldTtlMs: policy.heldTtlMs
})

/** The kernel's default-deny capability floor: may this principal call this tool at all? */
export const isGranted = (policy: ActivePolicy, principal: string, tool: string): boolean => policy.grants.get(principal)?.has(tool) ?? false
