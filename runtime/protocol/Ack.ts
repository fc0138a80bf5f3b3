import { Effect } from "effect"
import { HeldCalls } from "../loops/HeldCalls.js"
import { AckPayload } from "../schema/Requests.js"
import { signedRequest } from "./Request.js"

/** `wk.v1.held.ack`: the session has the result; delivery stops. Execution is not touched (heldcall/decide/Ack.ts). */
export const ack = (data: Uint8Array) =>
  Effect.gen(function* () {
    const { payload, envelope, policy } = yield* signedRequest(data, "ack", AckPayload)
    return (yield* (yield* HeldCalls).handle(payload.held_id, { _tag: "Ack", payload, envelope }, { policy })).reply
  })
