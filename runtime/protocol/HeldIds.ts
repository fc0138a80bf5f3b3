import { Context, Effect, Layer } from "effect"
import { readHeldIdSecret } from "../ledger/Provision.js"
import { heldIdOf, heldIdSaltOf } from "../schema/Canonical.js"

/** A call's held id and the salt it was derived with (recorded in `call.proposed`). */
export interface HeldIdOf {
  readonly heldId: string
  readonly salt: string
}

/**
 * Held ids of this deployment: stable for the same (principal, session, turn, call), so a
 * re-proposal finds its call, and unguessable without the kernel's secret (wk_secrets).
 */
export class HeldIds extends Context.Tag("wk/HeldIds")<HeldIds, { readonly of: (call: { principal: string; session_id: string; turn_id: string; call_id: string }) => HeldIdOf }>() {}

/** HeldIds keyed with the secret provisioning created. */
export const layerHeldIds = Layer.effect(
  HeldIds,
  Effect.map(readHeldIdSecret, (secret) =>
    HeldIds.of({
      of: (c) => {
        const salt = heldIdSaltOf(secret, c.principal, c.session_id, c.turn_id, c.call_id)
        return { heldId: heldIdOf(c.principal, c.session_id, c.turn_id, c.call_id, salt), salt }
      }
    })
  )
)
