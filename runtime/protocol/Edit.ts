import { Effect } from "effect"
import { HeldCalls } from "../loops/HeldCalls.js"
import { EditPayload } from "../schema/Requests.js"
import { signedRequest } from "./Request.js"

/** `wk.v1.held.edit`: a witness's changed arguments become the next generation (heldcall/decide/Edit.ts); answered once recorded. */
export const edit = (data: Uint8Array) =>
  Effect.gen(function* () {
    const { payload, envelope, policy } = yield* signedRequest(data, "edit", EditPayload)
    return (yield* (yield* HeldCalls).handle(payload.held_id, { _tag: "Edit", payload, envelope }, { policy })).reply
  })
