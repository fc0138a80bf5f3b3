import { Effect } from "effect"
import { HeldCallStore, type Loaded } from "../ledger/HeldCallStore.js"
import { Outbox } from "../ledger/Outbox.js"
import { EventIds } from "../heldcall/EventIds.js"
import type { EventOf } from "../schema/Events.js"
import { progress } from "./Actions.js"

/**
 * The `remind` action: the witness request goes out again on `wk.v1.witness.requests.<held_id>`
 * with `reminder: true` and the expiry, so routes can tell people before the call expires, and
 * `witness.reminded` records it (once per expiry; a crash between the two sends it twice).
 */
export const remind = (loaded: Loaded) =>
  Effect.gen(function* () {
    const f = loaded.facts
    const expiresAt = f.spec!.expires_at
    yield* (yield* Outbox).requestWitnesses(f.held_id, { held_id: f.held_id, generation: f.generation, expires_at: expiresAt, witness_request: f.witness_request, reminder: true })
    const reminded: EventOf<"witness.reminded"> = {
      type: "witness.reminded",
      event_id: EventIds.reminded(f.held_id, f.generation, expiresAt),
      held_id: f.held_id,
      generation: f.generation,
      at: new Date().toISOString(),
      expires_at: expiresAt
    }
    yield* (yield* HeldCallStore).append(loaded, [reminded])
    return progress
  })
