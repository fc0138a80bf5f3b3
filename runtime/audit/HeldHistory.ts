import { initialFacts } from "../heldcall/Facts.js"
import { evolve } from "../heldcall/Reducer.js"
import type { SequencedEvent } from "../schema/Events.js"
import type { HeldCallFacts } from "../schema/Facts.js"

/** Every event of one held call, in address order (seq, index), as the auditor read it. */
export interface HeldHistory {
  readonly heldId: string
  readonly events: ReadonlyArray<SequencedEvent>
}

/** One event, at its address (seq, index), with the facts just before and just after it was folded. */
export interface Step {
  readonly seq: number
  readonly index: number
  readonly event: SequencedEvent["event"]
  readonly before: HeldCallFacts
  readonly after: HeldCallFacts
  /** False when the reducer had already folded this event id (a duplicate). */
  readonly fresh: boolean
}

/** A held call re-folded with the kernel's own reducer, step by step. */
export interface Traced {
  readonly heldId: string
  readonly steps: ReadonlyArray<Step>
  readonly facts: HeldCallFacts
}

/** Folds a history with `evolve` (the same pure reducer the kernel uses), keeping each step. */
export const trace = (h: HeldHistory): Traced => {
  let facts = initialFacts(h.heldId)
  const steps: Array<Step> = []
  for (const e of h.events) {
    const next = evolve(facts, e)
    steps.push({ seq: e.seq, index: e.index, event: e.event, before: facts, after: next, fresh: next.seen.length > facts.seen.length })
    facts = next
  }
  return { heldId: h.heldId, steps, facts }
}
