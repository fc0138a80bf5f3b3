import { Effect } from "effect"
import type { DeliveredContinuation } from "../schema/Continuation.js"
import { Continuations } from "./ContinuationStore.js"

/**
 * What a delivery carries of a call's kept continuation: its digest and bytes (base64), or
 * `data: null` when the store no longer holds them or cannot be read (the delivery still goes
 * out: a result is never held back for a checkpoint). Undefined when the call kept none.
 */
export const deliveredContinuation = (digest: string | undefined) =>
  digest === undefined
    ? Effect.succeed(undefined)
    : Effect.flatMap(Continuations, (store) => store.kept(digest)).pipe(
        Effect.map((bytes): DeliveredContinuation => ({ digest, data: bytes === null ? null : Buffer.from(bytes).toString("base64") })),
        Effect.orElseSucceed((): DeliveredContinuation => ({ digest, data: null }))
      )
