import { Effect } from "effect"
import { Nats } from "./Nats.js"
import { Buckets } from "../schema/Subjects.js"

/** Marks a parked call to be cancelled if its session disconnects (the presence watch reads the marks). */
export const watchSession = (heldId: string, sessionId: string) =>
  Effect.gen(function* () {
    const { kv } = yield* Nats
    yield* Effect.promise(async () => (await kv(Buckets.presence)).put(heldId, sessionId)).pipe(Effect.ignore)
  })
