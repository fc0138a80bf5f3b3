import { Effect } from "effect"
import { HeldCalls } from "../loops/HeldCalls.js"
import { SettlePayload } from "../schema/Requests.js"
import { signedRequest } from "./Request.js"

/**
 * `wk.v1.held.settle`: a signed read-back attestation or admin determination of whether an
 * unknown outcome happened (heldcall/decide/Settle.ts). Recorded as `effect.settled`, which ends
 * the call like a recorded effect; the call is then driven (result admission, delivery to the agent).
 */
export const settle = (data: Uint8Array) =>
  Effect.gen(function* () {
    const { payload, envelope, policy } = yield* signedRequest(data, "settle", SettlePayload)
    return (yield* (yield* HeldCalls).handle(payload.held_id, { _tag: "Settle", payload, envelope }, { policy })).reply
  })
