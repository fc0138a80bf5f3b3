import type { Ancestor } from "../schema/HeldCallSpec.js"
import type { Dependency, HeldCallFacts } from "../schema/Facts.js"
import { canonicalCall } from "./Facts.js"

/**
 * Nested holds (design invariant 7): a held call may wait on held calls proposed for it
 * (`parent_held_id`). Pure: the edge checks and the dependency facts, no I/O.
 */

/** The chain bound when no profile sets `max_dependency_depth`. */
export const DefaultMaxDependencyDepth = 4

/** The bound in force: the smallest `max_dependency_depth` across the active profiles. */
export const maxDependencyDepth = (profiles: ReadonlyArray<{ readonly max_dependency_depth?: number | undefined }>): number =>
  profiles.reduce((m, p) => (p.max_dependency_depth === undefined ? m : Math.min(m, p.max_dependency_depth)), DefaultMaxDependencyDepth)

/** The chain a child of `parent` would have above it: the parent's ancestors, then the parent. */
export const chainOf = (parent: HeldCallFacts): ReadonlyArray<Ancestor> => [
  ...(parent.spec?.ancestors ?? []),
  { held_id: parent.held_id, call_digest: canonicalCall(parent)?.call_digest ?? "" }
]

/** Whether an edge parent -> child may be added: the child's chain, or the reason it fails closed. */
export type EdgeCheck =
  | { readonly _tag: "Allowed"; readonly ancestors: ReadonlyArray<Ancestor>; readonly depth: number }
  | { readonly _tag: "Refused"; readonly reason: string }

/**
 * A child whose held id is already in its chain would wait on itself: a cycle. The same call
 * (an equal digest) under another held id is a different call and no cycle: it is adjudicated
 * on its own, and the depth bound ends any chain. A child deeper than `bound` (root depth 0)
 * exceeds the profile's bound. Both refuse the edge.
 */
export const checkEdge = (parent: HeldCallFacts, child: { readonly held_id: string; readonly call_digest: string }, bound: number): EdgeCheck => {
  const chain = chainOf(parent)
  const at = chain.findIndex((a) => a.held_id === child.held_id)
  if (at >= 0) {
    const loop = [...chain.slice(at).map((a) => a.held_id), child.held_id]
    return { _tag: "Refused", reason: `dependency cycle: ${loop.join(" -> ")} (held call ${child.held_id} already waits on this chain)` }
  }
  const depth = chain.length
  if (depth > bound) return { _tag: "Refused", reason: `dependency depth ${depth} exceeds max_dependency_depth ${bound}` }
  return { _tag: "Allowed", ancestors: chain, depth }
}

/** Dependencies the call still waits for. */
export const openDependencies = (f: HeldCallFacts): ReadonlyArray<Dependency> => (f.dependencies ?? []).filter((d) => d.status === "pending")

/** Why a dependency failed (refused, or ended other than completed), or undefined while it has not. */
const failure = (d: Dependency): string | undefined => {
  if (d.status === "refused") return d.reason ?? `dependency ${d.held_id} refused`
  if (d.status === "resolved" && d.outcome !== "completed") return `dependency ${d.held_id} ended ${d.outcome}${d.reason ? `: ${d.reason}` : ""}`
  return undefined
}

/** Whether the call's own proposer attached the dependency (unknown attachers count as the proposer: fail closed). */
const byProposer = (f: HeldCallFacts, d: Dependency): boolean => d.attached_by === undefined || d.attached_by === f.spec?.principal

/**
 * The first dependency its proposer attached that failed (refused, or ended other than
 * completed), with the reason: it fails the call closed. A witness's failed dependency does
 * not (see `dependencyRejects`).
 */
export const failedDependency = (f: HeldCallFacts): { readonly dependency: Dependency; readonly reason: string } | undefined => {
  for (const d of f.dependencies ?? []) {
    const reason = byProposer(f, d) ? failure(d) : undefined
    if (reason !== undefined) return { dependency: d, reason }
  }
  return undefined
}

/**
 * A witness's dependency that failed counts at most as that witness's reject of the generation
 * it was attached under: so no witness can end a call by attaching a call the kernel refuses or
 * denies, beyond what its own reject could do.
 */
export const dependencyRejects = (f: HeldCallFacts): ReadonlyArray<{ readonly witness: string; readonly reason: string }> =>
  (f.dependencies ?? []).flatMap((d) => {
    const reason = byProposer(f, d) || d.generation !== f.generation ? undefined : failure(d)
    return reason === undefined ? [] : [{ witness: d.attached_by!, reason }]
  })

const rank = { pending: 0, resolved: 1, refused: 2 } as const

/**
 * Folds one statement about a dependency. Commutative and idempotent: the strongest status
 * wins (refused > resolved > pending) and the list stays sorted by held id, so arrival order
 * and duplicates give the same facts.
 */
export const withDependency = (deps: ReadonlyArray<Dependency> | undefined, item: Dependency): ReadonlyArray<Dependency> => {
  const list = deps ?? []
  const prev = list.find((d) => d.held_id === item.held_id)
  const keep = prev !== undefined && (rank[prev.status] > rank[item.status] || (rank[prev.status] === rank[item.status] && key(prev) <= key(item)))
  const [winner, other] = keep ? [prev, item] : [item, prev]
  // Who attached the edge, and under which generation, is known from whichever statement carries it.
  const attached_by = winner.attached_by ?? other?.attached_by
  const generation = winner.generation ?? other?.generation
  const next = { ...winner, ...(attached_by !== undefined ? { attached_by } : {}), ...(generation !== undefined ? { generation } : {}) }
  return [...list.filter((d) => d.held_id !== item.held_id), next].sort((a, b) => (a.held_id < b.held_id ? -1 : a.held_id > b.held_id ? 1 : 0))
}

const key = (d: Dependency): string => JSON.stringify([d.outcome ?? "", d.reason ?? "", d.attached_by ?? "", d.generation ?? -1])
