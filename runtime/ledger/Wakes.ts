import { Effect } from "effect"
import { Subjects } from "../schema/Subjects.js"
import { LedgerError } from "./LedgerError.js"
import { Nats } from "./Nats.js"

/**
 * Records durably that a held call needs the controller: before an effect is dispatched (so a
 * crash is recovered), when a call parks (timers), and when a witness, cancel or policy change
 * enables work. `WK_WAKES` keeps at most one wake per call; the controller consumes it and
 * either acks (nothing left to do) or asks for it again after the reconciler's delay.
 */
const Empty = new Uint8Array(0)

export const wake = (heldId: string) =>
  Effect.gen(function* () {
    const { publish } = yield* Nats
    yield* Effect.tryPromise({
      try: () => publish(Subjects.wake(heldId), Empty),
      catch: (cause) => new LedgerError({ operation: `wake ${heldId}`, message: String(cause), cause })
    })
  })

/**
 * Starts the wake's publish now and returns the effect that awaits its ack: the caller's next
 * write (the execution claim) goes out in the same socket flush, without forking fibers.
 */
export const startWake = (heldId: string) =>
  Effect.map(Nats, ({ publish }) => {
    const acked = publish(Subjects.wake(heldId), Empty)
    acked.catch(() => undefined) // observed by the returned effect
    return Effect.tryPromise({
      try: () => acked,
      catch: (cause) => new LedgerError({ operation: `wake ${heldId}`, message: String(cause), cause })
    })
  })
