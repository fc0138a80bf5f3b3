import { Effect } from "effect"
import { HeldCalls } from "../loops/HeldCalls.js"
import { ExtendPayload } from "../schema/Requests.js"
import { signedRequest } from "./Request.js"

/** `wk.v1.held.extend`: a witness moves a held call's expiry later (heldcall/decide/Extend.ts). */
export const extend = (data: Uint8Array) =>
  Effect.gen(function* () {
    const { payload, envelope, policy } = yield* signedRequest(data, "extend", ExtendPayload)
    return (yield* (yield* HeldCalls).handle(payload.held_id, { _tag: "Extend", payload, envelope }, { policy })).reply
  })
