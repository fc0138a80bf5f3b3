import type { WitnessRule } from "../schema/WitnessContract.js"

/** Who is asking to see held calls: a principal, its classes, or both. */
export interface InboxViewer {
  readonly principal?: string
  readonly classes: ReadonlyArray<string>
}

/** Every class and principal a rule names, at any depth. */
export const namedIn = (rule: WitnessRule): { classes: Set<string>; principals: Set<string> } => {
  const classes = new Set<string>()
  const principals = new Set<string>()
  const walk = (r: WitnessRule): void => {
    if ("class" in r) classes.add(r.class)
    else if ("principal" in r) principals.add(r.principal)
    else if ("all" in r) r.all.forEach(walk)
    else if ("any" in r) r.any.forEach(walk)
    else r.quorum.of.forEach(walk)
  }
  walk(rule)
  return { classes, principals }
}

/**
 * True when the viewer could give evidence that counts: the active rule (or the veto list)
 * names its principal or one of its classes. The proposer never sees its own call (not independent).
 */
export const concerns = (viewer: InboxViewer, held: { principal?: string; rule: WitnessRule | null; veto?: ReadonlyArray<string> }): boolean => {
  if (held.rule === null) return false
  if (viewer.principal !== undefined && held.principal === viewer.principal) return false
  const n = namedIn(held.rule)
  if (viewer.principal !== undefined && n.principals.has(viewer.principal)) return true
  return viewer.classes.some((c) => n.classes.has(c) || (held.veto ?? []).includes(c))
}
