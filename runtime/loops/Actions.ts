/** What performing one action led to: new facts to re-plan from, or a wait. */
export type ActionResult =
  | { readonly _tag: "Progress" }
  | { readonly _tag: "Requeue"; readonly afterMs: number }

export const progress: ActionResult = { _tag: "Progress" }
export const requeue = (afterMs: number): ActionResult => ({ _tag: "Requeue", afterMs: Math.max(1, Math.ceil(afterMs)) })
