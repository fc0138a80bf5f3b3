import { canonicalize } from "../../schema/Canonical.js"
import type { HeldCallFacts } from "../../schema/Facts.js"

/** How one call's KV projection relates to its re-fold. */
export type ProjectionComparison =
  | { readonly kind: "matched" | "lagging" | "ahead" | "missing" }
  | { readonly kind: "mismatched"; readonly fields: ReadonlyArray<string> }

/**
 * `projection`: the KV facts must equal the re-fold when both folded up to the same stream
 * sequence. A projection behind the stream is lagging (the index catches up), one ahead means
 * the kernel appended after the replay read; neither is a violation.
 */
export const compareProjection = (folded: HeldCallFacts, projected: HeldCallFacts | null): ProjectionComparison => {
  if (projected === null) return { kind: "missing" }
  if (projected.last_seq < folded.last_seq) return { kind: "lagging" }
  if (projected.last_seq > folded.last_seq) return { kind: "ahead" }
  const a = folded as unknown as Record<string, unknown>
  const b = projected as unknown as Record<string, unknown>
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()
  const fields = keys.filter((k) => canonicalize(a[k] ?? null) !== canonicalize(b[k] ?? null))
  return fields.length === 0 ? { kind: "matched" } : { kind: "mismatched", fields }
}
