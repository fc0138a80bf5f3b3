import { Effect } from "effect"
import { HeldCalls } from "../loops/HeldCalls.js"
import { CancelPayload } from "../schema/Requests.js"
import { signedRequest } from "./Request.js"

/** `wk.v1.held.cancel`: idempotent; refused once the effect may have happened (heldcall/decide/Cancel.ts). */
export const cancel = (data: Uint8Array) =>
  Effect.gen(function* () {
    const { payload, envelope, policy } = yield* signedRequest(data, "cancel", CancelPayload)
    return (yield* (yield* HeldCalls).handle(payload.held_id, { _tag: "Cancel", payload, envelope }, { policy })).reply
  })
