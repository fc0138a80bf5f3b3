import { Effect } from "effect"
import { HeldCallStore } from "../ledger/HeldCallStore.js"
import { GetRequest } from "../schema/Requests.js"
import { heldView, notFound } from "./Replies.js"
import { plainRequest } from "./Request.js"

/** `wk.v1.held.get`: the spec and facts of a held call. */
export const get = (data: Uint8Array) =>
  Effect.gen(function* () {
    const { held_id } = yield* plainRequest(data, GetRequest)
    const store = yield* HeldCallStore
    const loaded = yield* store.load(held_id)
    if (loaded === null || loaded.facts.spec === null) return notFound(held_id)
    return { status: 200, held: heldView(loaded.facts) }
  })
