import type { EventOf } from "../../schema/Events.js"
import type { HeldCallFacts } from "../../schema/Facts.js"
import { atOf } from "../decide/Decision.js"
import { deliveryIdOf, EventIds } from "../EventIds.js"

/**
 * The records of notices the drive sent out of the process: each is written after its message
 * went out, and a crash in between sends the message again (the ids make the record one event).
 */

/** The `attempt`-th publication of the call's result delivery. */
export const deliveryPublished = (f: HeldCallFacts, attempt: number, now: number): EventOf<"delivery.published"> => {
  const deliveryId = deliveryIdOf(f)
  return { held_id: f.held_id, generation: f.generation, at: atOf({ now }), type: "delivery.published", event_id: EventIds.deliveryPublished(f.held_id, deliveryId, attempt), delivery_id: deliveryId, attempt }
}

/** The witnesses were reminded of the call's current expiry (once per expiry). */
export const witnessReminded = (f: HeldCallFacts, now: number): EventOf<"witness.reminded"> => {
  const expiresAt = f.spec!.expires_at
  return { type: "witness.reminded", event_id: EventIds.reminded(f.held_id, f.generation, expiresAt), held_id: f.held_id, generation: f.generation, at: atOf({ now }), expires_at: expiresAt }
}

/** A nested call's end was recorded on its parent. */
export const dependencyReported = (f: HeldCallFacts, now: number): EventOf<"dependency.reported"> => {
  const parentId = f.spec!.parent_held_id!
  return { type: "dependency.reported", event_id: EventIds.dependencyReported(f.held_id, parentId), held_id: f.held_id, generation: f.generation, at: atOf({ now }), parent_held_id: parentId }
}
