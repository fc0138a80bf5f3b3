import { Effect, Layer } from "effect"
import { OpenIndex } from "../OpenIndex.js"

/** The open-call index in memory. */
export const makeMemoryOpenIndex = Effect.sync(() => {
  const open = new Set<string>()
  return OpenIndex.of({
    add: (heldId) => Effect.sync(() => void open.add(heldId)),
    remove: (heldId) => Effect.sync(() => void open.delete(heldId)),
    removeIfPresent: (heldId) => Effect.sync(() => void open.delete(heldId)),
    list: Effect.sync(() => [...open].sort())
  })
})

export const layerMemoryOpenIndex = Layer.effect(OpenIndex, makeMemoryOpenIndex)
