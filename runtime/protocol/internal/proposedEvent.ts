import { eventOf } from "../../loops/Actions.js"
import type { CallProposed } from "../../schema/Events.js"
import type { Ancestor } from "../../schema/HeldCallSpec.js"
import type { ProposeCall } from "../../schema/Requests.js"
import type { Signed } from "../Request.js"

/**
 * The `call.proposed` event of generation `generation` of a call, from the agent's signed
 * request: the one place that maps a proposal onto the event (propose, and a refused nested call).
 */
export const proposedEvent = (o: {
  readonly heldId: string
  /** The salt the held id was derived with (HeldIds). */
  readonly salt: string
  readonly generation: number
  readonly req: Signed<ProposeCall>
  readonly digest: string
  readonly now: number
  readonly expiresAt: number
  readonly parent?: { readonly parent_held_id: string; readonly ancestors?: ReadonlyArray<Ancestor> }
}) => {
  const p = o.req.payload
  const at = new Date(o.now).toISOString()
  return eventOf<typeof CallProposed.Type>({
    type: "call.proposed",
    event_id: `call.proposed:${o.heldId}:g${o.generation}`,
    held_id: o.heldId,
    generation: o.generation,
    principal: p.principal,
    session_id: p.session_id,
    turn_id: p.turn_id,
    call_id: p.call_id,
    tool: p.tool,
    args: p.args,
    call_digest: o.digest,
    ...(p.continuation_ref !== undefined ? { continuation_ref: p.continuation_ref } : {}),
    ...(p.preferences !== undefined ? { preferences: p.preferences } : {}),
    ...(o.parent !== undefined ? { parent_held_id: o.parent.parent_held_id, ...(o.parent.ancestors !== undefined ? { ancestors: o.parent.ancestors } : {}) } : {}),
    idempotency_key: `${o.heldId}:g${o.generation}`,
    held_id_salt: o.salt,
    created_at: at,
    expires_at: new Date(o.expiresAt).toISOString(),
    envelope: o.req.envelope,
    at
  })
}
