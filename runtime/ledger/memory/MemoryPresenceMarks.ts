import { Context, Effect, Layer } from "effect"
import { PresenceMarks } from "../PresenceMarks.js"

/** What a test controls in memory presence: which sessions are connected (all, unless told otherwise). */
export interface MemoryPresenceControl {
  readonly disconnect: (sessionId: string) => void
  readonly connect: (sessionId: string) => void
}

export class MemoryPresence extends Context.Tag("wk/MemoryPresence")<MemoryPresence, MemoryPresenceControl>() {}

/** Presence marks in memory; a probe answers from the sessions the test disconnected. */
export const makeMemoryPresenceMarks = Effect.sync(() => {
  const marks = new Map<string, string>()
  const gone = new Set<string>()
  const port = PresenceMarks.of({
    mark: (heldId, sessionId) => Effect.sync(() => void marks.set(heldId, sessionId)),
    unmark: (heldId) => Effect.sync(() => void marks.delete(heldId)),
    marks: Effect.sync(() => [...marks].map(([heldId, sessionId]) => ({ heldId, sessionId }))),
    probe: (sessionId) => Effect.sync(() => (gone.has(sessionId) ? "absent" : "present"))
  })
  const control: MemoryPresenceControl = { disconnect: (s) => void gone.add(s), connect: (s) => void gone.delete(s) }
  return Context.make(PresenceMarks, port).pipe(Context.add(MemoryPresence, control))
})

export const layerMemoryPresenceMarks = Layer.effectContext(makeMemoryPresenceMarks)
