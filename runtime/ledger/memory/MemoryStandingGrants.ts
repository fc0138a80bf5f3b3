import { Effect, Layer } from "effect"
import { candidateIndex, StandingGrants, storedGrantOf, type StoredGrant } from "../StandingGrants.js"

/** In memory: the same compare-and-set, one process's worth. */
export const makeMemoryStandingGrants = Effect.sync(() => {
  const view = candidateIndex()
  const last = new Map<string, StoredGrant>()
  let seq = 0
  return StandingGrants.of({
    get: (grantId) => Effect.sync(() => last.get(grantId) ?? null),
    put: (record, afterSeq) =>
      Effect.sync(() => {
        if ((last.get(record.grant_id)?.seq ?? 0) !== afterSeq) return null
        const g = storedGrantOf(JSON.stringify(record), ++seq)!
        last.set(record.grant_id, g)
        view.see(g)
        return g
      }),
    candidates: view.candidates,
    known: view.known
  })
})

export const layerMemoryStandingGrants = Layer.effect(StandingGrants, makeMemoryStandingGrants)
