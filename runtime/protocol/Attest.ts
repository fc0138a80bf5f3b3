import { Effect } from "effect"
import { HeldCalls } from "../loops/HeldCalls.js"
import { AttestPayload } from "../schema/Requests.js"
import { signedRequest } from "./Request.js"

/** `wk.v1.held.attest`: records the attestation (accepted or rejected, both as events; heldcall/decide/Attest.ts) and never waits for execution. */
export const attest = (data: Uint8Array) =>
  Effect.gen(function* () {
    const { payload, envelope, policy } = yield* signedRequest(data, "attest", AttestPayload)
    return (yield* (yield* HeldCalls).handle(payload.held_id, { _tag: "Attest", payload, envelope }, { policy })).reply
  })
