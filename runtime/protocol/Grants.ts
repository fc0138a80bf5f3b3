import { Effect, Either } from "effect"
import { PolicyStore } from "../policy/PolicyStore.js"
import { ReaderRequest } from "../schema/Requests.js"
import { readerFor } from "./ReadProof.js"
import { plainRequest } from "./Request.js"

/**
 * `wk.v1.grants.get`: the tools the signed reader is granted under the policy in force, sorted,
 * with the epoch. A grant lists what the kernel may allow, not what it will: each call is still
 * decided on its own. A bad proof is a 401, as for every signed read (bound to `grants.get`,
 * its nonce good once).
 */
export const grants = (data: Uint8Array) =>
  Effect.gen(function* () {
    const req = yield* plainRequest(data, ReaderRequest)
    const proved = yield* readerFor(req.reader, { operation: "grants.get" })
    if (Either.isLeft(proved)) return proved.left
    const policy = yield* (yield* PolicyStore).current
    const principal = proved.right.principal
    return { status: 200, principal, policy_epoch: policy.epoch, tools: [...(policy.grants.get(principal) ?? [])].sort() }
  })
