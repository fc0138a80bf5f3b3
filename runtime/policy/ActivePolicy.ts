import type { PrincipalEntry, Profile, ToolRule } from "../schema/Profile.js"
import { jcsDigest } from "../schema/Canonical.js"

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
  const rules = new Map<string, ToolRule>()
  const admins = new Set<string>()
  let heldTtlMs = DefaultHeldTtlMs
  for (const p of profiles) {
    for (const [name, entry] of Object.entries(p.principals ?? {})) {
      const prev = principals.get(name)
      principals.set(name, prev ? { keys: [...new Set([...prev.keys, ...entry.keys])], classes: [...new Set([...prev.classes, ...entry.classes])] } : entry)
    }
    for (const [name, tools] of Object.entries(p.grants ?? {})) {
      const set = grants.get(name) ?? new Set<string>()
      for (const t of tools) set.add(t)
      grants.set(name, set)
    }
    for (const [tool, rule] of Object.entries(p.rules ?? {})) rules.set(tool, stricter(rules.get(tool), rule))
    for (const a of p.admins ?? []) admins.add(a)
    if (p.held_ttl_ms !== undefined) heldTtlMs = Math.min(heldTtlMs, p.held_ttl_ms)
  }
  return { epoch, digest: jcsDigest(profiles), profiles, principals, grants, rules, heldTtlMs, admins }
}

const minDefined = (a: number | undefined, b: number | undefined): number | undefined =>
  a === undefined ? b : b === undefined ? a : Math.min(a, b)

const stricter = (a: ToolRule | undefined, b: ToolRule): ToolRule =>
  a === undefined
    ? b
    : {
        amount_field: a.amount_field ?? b.amount_field,
        witness_above: minDefined(a.witness_above, b.witness_above),
        deny_above: minDefined(a.deny_above, b.deny_above),
        always_witness: (a.always_witness ?? false) || (b.always_witness ?? false),
        contract: a.contract && b.contract ? { rule: { all: [a.contract.rule, b.contract.rule] }, veto: [...new Set([...(a.contract.veto ?? []), ...(b.contract.veto ?? [])])] } : (a.contract ?? b.contract)
      }

/** Classes a principal is registered with (empty when unknown). */
export const classesOf = (policy: ActivePolicy, principal: string): ReadonlyArray<string> => policy.principals.get(principal)?.classes ?? []

/** The kernel's default-deny capability floor: may this principal call this tool at all? */
export const isGranted = (policy: ActivePolicy, principal: string, tool: string): boolean => policy.grants.get(principal)?.has(tool) ?? false
