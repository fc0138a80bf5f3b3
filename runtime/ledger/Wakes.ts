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

/** What the claim wake says: which process is driving the call through, and until when its lease holds. */
export interface Driving {
  readonly owner: string
  readonly until: number
}

const encoder = new TextEncoder()

/** The `Driving` a wake body carries, or null (a plain wake, or a body this kernel does not know). */
export const drivingOf = (data: Uint8Array): Driving | null => {
  if (data.length === 0) return null
  try {
    const d = JSON.parse(new TextDecoder().decode(data)) as { driving?: { owner?: unknown; until?: unknown } }
    const owner = d.driving?.owner
    const until = d.driving?.until
    return typeof owner === "string" && typeof until === "number" ? { owner, until } : null
  } catch {
    return null
  }
}

/**
 * Starts the claim's wake now and returns the effect that awaits its ack: the caller's next
 * write (the execution claim) goes out in the same socket flush, without forking fibers. The
 * wake names the process driving the call, so another kernel that is handed it first leaves it
 * until the lease ends (by then the call has almost always settled) instead of reading the call
 * from the stream while its owner is still finishing it.
 */
export const startWake = (heldId: string, driving: Driving) =>
  Effect.map(Nats, ({ publish }) => {
    const acked = publish(Subjects.wake(heldId), encoder.encode(JSON.stringify({ driving })))
    acked.catch(() => undefined) // observed by the returned effect
    return Effect.tryPromise({
      try: () => acked,
      catch: (cause) => new LedgerError({ operation: `wake ${heldId}`, message: String(cause), cause })
    })
  })
