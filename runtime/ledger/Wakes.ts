import { Effect } from "effect"
import { Subjects } from "../schema/Subjects.js"
import { LedgerError } from "./LedgerError.js"
import { Nats } from "./Nats.js"

/**
 * What a wake written by a process that is driving the call through says: who, and until when
 * (its lease). Another kernel handed such a wake first leaves it until then (the owner is still
 * finishing the call; recovery if it died) instead of reading the call mid-flight.
 */
export interface Driving {
  readonly owner: string
  readonly until: number
}

const Empty = new Uint8Array(0)
const encoder = new TextEncoder()

const bodyOf = (driving: Driving | undefined): Uint8Array => (driving === undefined ? Empty : encoder.encode(JSON.stringify({ driving })))

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
 * Records durably that a held call needs the controller: before an effect is dispatched (so a
 * crash is recovered), when a call parks (timers), and when a witness, cancel or policy change
 * enables work. `WK_WAKES` keeps at most one wake per call; the controller consumes it and
 * either acks (nothing left to do) or asks for it again after the reconciler's delay.
 */
export const wake = (heldId: string, driving?: Driving): Effect.Effect<void, LedgerError, Nats> => Effect.flatten(startWake(heldId, driving))

/**
 * Starts the wake's publish now and returns the effect that awaits its ack: the caller's next
 * write (the execution claim) goes out in the same socket flush, without forking fibers.
 */
export const startWake = (heldId: string, driving?: Driving) =>
  Effect.map(Nats, ({ publish }) => {
    const acked = publish(Subjects.wake(heldId), bodyOf(driving))
    acked.catch(() => undefined) // observed by the returned effect
    return Effect.tryPromise({
      try: () => acked.then(() => undefined),
      catch: (cause) => new LedgerError({ operation: `wake ${heldId}`, message: String(cause), cause })
    })
  })
