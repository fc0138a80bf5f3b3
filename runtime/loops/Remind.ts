import { Clock, Effect } from "effect"
import { HeldCallStore, type Loaded } from "../ledger/HeldCallStore.js"
import { Outbox } from "../ledger/Outbox.js"
import { witnessReminded } from "../heldcall/plan/Notices.js"
import { progress } from "./Actions.js"

/**
 * The `remind` action: the witness request goes out again on `wk.v1.witness.requests.<held_id>`
 * with `reminder: true` and the expiry, so routes can tell people before the call expires, and
 * `witness.reminded` records it (once per expiry; a crash between the two sends it twice).
 */
export const remind = (loaded: Loaded) =>
  Effect.gen(function* () {
    const f = loaded.facts
    yield* (yield* Outbox).requestWitnesses(f.held_id, { held_id: f.held_id, generation: f.generation, expires_at: f.spec!.expires_at, witness_request: f.witness_request, reminder: true })
    yield* (yield* HeldCallStore).append(loaded, [witnessReminded(f, yield* Clock.currentTimeMillis)])
    return progress
  })
