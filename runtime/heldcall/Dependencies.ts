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
 * A child whose held id or call digest is already in its chain would wait on itself: a cycle.
 * A child deeper than `bound` (root depth 0) exceeds the profile's bound. Both refuse the edge.
 */
export const checkEdge = (parent: HeldCallFacts, child: { readonly held_id: string; readonly call_digest: string }, bound: number): EdgeCheck => {
  const chain = chainOf(parent)
  const digests = new Set([...chain.map((a) => a.call_digest), parent.spec?.call_digest ?? ""])
  const at = chain.findIndex((a) => a.held_id === child.held_id || a.call_digest === child.call_digest)
  if (chain.some((a) => a.held_id === child.held_id) || digests.has(child.call_digest)) {
    const from = at >= 0 ? at : chain.length - 1
    const loop = [...chain.slice(from).map((a) => a.held_id), child.held_id]
    return { _tag: "Refused", reason: `dependency cycle: ${loop.join(" -> ")} (call ${child.call_digest.slice(0, 12)} already waits on this chain)` }
  }
  const depth = chain.length
  if (depth > bound) return { _tag: "Refused", reason: `dependency depth ${depth} exceeds max_dependency_depth ${bound}` }
  return { _tag: "Allowed", ancestors: chain, depth }
}

/** Dependencies the call still waits for. */
export const openDependencies = (f: HeldCallFacts): ReadonlyArray<Dependency> => (f.dependencies ?? []).filter((d) => d.status === "pending")

/** The first dependency that fails the call closed (refused, or ended other than completed), with the reason. */
export const failedDependency = (f: HeldCallFacts): { readonly dependency: Dependency; readonly reason: string } | undefined => {
  for (const d of f.dependencies ?? []) {
    if (d.status === "refused") return { dependency: d, reason: d.reason ?? `dependency ${d.held_id} refused` }
    if (d.status === "resolved" && d.outcome !== "completed") {
      return { dependency: d, reason: `dependency ${d.held_id} ended ${d.outcome}${d.reason ? `: ${d.reason}` : ""}` }
    }
  }
  return undefined
}

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
  const next = keep ? prev : item
  return [...list.filter((d) => d.held_id !== item.held_id), next].sort((a, b) => (a.held_id < b.held_id ? -1 : a.held_id > b.held_id ? 1 : 0))
}

const key = (d: Dependency): string => JSON.stringify([d.outcome ?? "", d.reason ?? ""])
