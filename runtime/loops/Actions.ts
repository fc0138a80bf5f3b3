import type { HeldEvent } from "../schema/Events.js"

/** What performing one action led to: new facts to re-plan from, or a wait. */
export type ActionResult =
  | { readonly _tag: "Progress" }
  | { readonly _tag: "Requeue"; readonly afterMs: number }

export const progress: ActionResult = { _tag: "Progress" }
export const requeue = (afterMs: number): ActionResult => ({ _tag: "Requeue", afterMs: Math.max(1, Math.ceil(afterMs)) })

/** Builds an event with the fields every event carries. */
export const eventOf = <E extends HeldEvent>(fields: Omit<E, "at"> & { at?: string }): E =>
  ({ at: new Date().toISOString(), ...fields }) as E
