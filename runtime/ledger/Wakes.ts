import { Context, Effect, Layer, Queue, Stream, type Scope } from "effect"
import { errorFields, log } from "../observability/Log.js"
import type { JsMsg } from "@nats-io/jetstream"
import { Streams, Subjects } from "../schema/Subjects.js"
import { LedgerError } from "../schema/LedgerError.js"
import { Nats } from "./Nats.js"
import { ControllerConsumer, ensureControllerConsumer } from "./Provision.js"

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
 * The writing side of the durable wake queue. A wake records that a held call needs the
 * controller: before an effect is dispatched (so a crash is recovered), when a call parks
 * (timers), and when a witness, cancel or policy change enables work. The queue keeps at most
 * one pending wake per call.
 */
export class Wakes extends Context.Tag("wk/Wakes")<
  Wakes,
  {
    /**
     * Starts writing the wake when called (not when the result is run) and returns the effect
     * that awaits its acknowledgement: the caller's next write goes out in the same flush.
     */
    readonly begin: (heldId: string, driving?: Driving) => Effect.Effect<void, LedgerError>
    /**
     * The call this process drove is settled: a wake it wrote with `driving` that no consumer of
     * this process has taken is deleted from the queue. Another kernel handed that wake leaves
     * it until the lease ends, then reads the call cold only to find nothing to do; a wake this
     * process's controller took is acked there. Fire and forget: a wake that stays (the delete
     * failed, or the call was forgotten) is looked at once more when its lease ends.
     */
    readonly retire: (heldId: string) => void
  }
>() {}

/** One wake handed to the controller: ack when the call needs nothing more, nak to see it again after a delay. */
export interface WakeDelivery {
  readonly heldId: string
  /** Set when the writer was driving the call itself (see `Driving`). */
  readonly driving: Driving | null
  /** This wake was handed out before and not acked. */
  readonly redelivered: boolean
  /** How many times it was handed out, this time included. */
  readonly deliveries: number
  readonly ack: () => void
  readonly nak: (delayMs: number) => void
  /** Gives the wake up: never handed out again (a later wake of the call is a new one). */
  readonly term: () => void
  /** Still working on it: restarts the redelivery timer. */
  readonly working: () => void
}

/**
 * The consuming side of the wake queue, shared by every kernel process: each wake is handed to
 * one of them at a time; a wake not acked within `ackWaitMs` (its consumer died) is handed out again.
 */
export class WakeQueue extends Context.Tag("wk/WakeQueue")<
  WakeQueue,
  {
    readonly consume: (opts: { readonly ackWaitMs: number }) => Effect.Effect<Stream.Stream<WakeDelivery>, LedgerError, Scope.Scope>
  }
>() {}

/** Writes a wake and waits for it to be durable. */
export const wake = (heldId: string, driving?: Driving): Effect.Effect<void, LedgerError, Wakes> => Effect.flatten(startWake(heldId, driving))

/** `Wakes.begin` as an effect: the write starts when this runs; the result awaits it. */
export const startWake = (heldId: string, driving?: Driving) => Effect.map(Wakes, (wakes) => wakes.begin(heldId, driving))

const WakesPrefix = "wk.v1.wakes."

/** Most driving wakes one process remembers for `retire` (the oldest are forgotten: they stay and are looked at once more). */
const WrittenMax = 10_000

/**
 * The driving wakes this process wrote and its controller has not taken, by call: their stream
 * sequence. Shared by the writing and the consuming side of one connection.
 */
const writtenOn = new WeakMap<Context.Tag.Service<typeof Nats>["nc"], Map<string, number>>()
const writtenBy = (nats: Context.Tag.Service<typeof Nats>): Map<string, number> => {
  let m = writtenOn.get(nats.nc)
  if (m === undefined) writtenOn.set(nats.nc, (m = new Map()))
  return m
}

/** Wakes on `WK_WAKES` (one message per subject, a work queue). */
export const layerNatsWakes = Layer.effect(
  Wakes,
  Effect.map(Nats, (nats) => {
    const written = writtenBy(nats)
    return Wakes.of({
      begin: (heldId, driving) => {
        const acked = nats.publish(Subjects.wake(heldId), bodyOf(driving))
        // Usually durable by the time the caller awaits it (its ack comes with the commit's): then
        // the await is no fiber step. A failure is observed by the returned effect.
        let durable = false
        acked.then((ack) => {
          durable = true
          if (driving === undefined) return
          written.delete(heldId)
          written.set(heldId, ack.seq)
          if (written.size > WrittenMax) written.delete(written.keys().next().value!)
        }, () => undefined)
        return Effect.suspend(() => durable ? Effect.void : Effect.tryPromise({
          try: () => acked.then(() => undefined),
          catch: (cause) => new LedgerError({ operation: `wake ${heldId}`, message: String(cause), cause })
        }))
      },
      retire: (heldId) => {
        const seq = written.get(heldId)
        if (seq === undefined) return
        written.delete(heldId)
        // By sequence: a newer wake of the call (another command's) is another message and stays.
        nats.jsm.streams.deleteMessage(Streams.wakes, seq, false).catch(() => undefined)
      }
    })
  })
)

/** Forgets a driving wake this process wrote once its controller takes it (or a later one of the call): acked there, not retired. */
const taken = (written: Map<string, number>, msg: JsMsg): void => {
  const heldId = msg.subject.slice(WakesPrefix.length)
  const seq = written.get(heldId)
  if (seq !== undefined && msg.seq >= seq) written.delete(heldId)
}

const deliveryOf = (msg: JsMsg): WakeDelivery => ({
  heldId: msg.subject.slice(WakesPrefix.length),
  driving: drivingOf(msg.data),
  redelivered: msg.redelivered,
  deliveries: msg.info.deliveryCount,
  ack: () => msg.ack(),
  nak: (delayMs) => msg.nak(delayMs),
  term: () => msg.term(),
  working: () => msg.working()
})

/** The controller's durable consumer on `WK_WAKES` (created by provisioning when missing). */
export const layerNatsWakeQueue = Layer.effect(
  WakeQueue,
  Effect.map(Nats, (nats) =>
    WakeQueue.of({
      consume: ({ ackWaitMs }) =>
        Effect.gen(function* () {
          yield* ensureControllerConsumer(ackWaitMs).pipe(Effect.provideService(Nats, nats))
          const consumer = yield* Effect.tryPromise({
            try: () => nats.js.consumers.get(Streams.wakes, ControllerConsumer),
            catch: (cause) => new LedgerError({ operation: "open controller consumer", message: String(cause), cause })
          })
          const handedOut = yield* Effect.acquireRelease(Queue.unbounded<WakeDelivery>(), Queue.shutdown)
          const messages = yield* Effect.acquireRelease(
            Effect.tryPromise({
              try: () => consumer.consume({ max_messages: 256 }),
              catch: (cause) => new LedgerError({ operation: "consume controller", message: String(cause), cause })
            }),
            (m) => Effect.promise(() => m.close().then(() => undefined, () => undefined))
          )
          // A plain loop, not a stream over the iterator: closing the consumer ends it, where an
          // iterator's return() would wait for a message that may never come.
          const written = writtenBy(nats)
          void (async () => {
            for await (const msg of messages) {
              taken(written, msg)
              // Handed to the controller once the I/O of this turn is handled: a claim's wake comes
              // in the same socket read as the claim's acknowledgement, and the drive waiting on
              // that goes first (its tool request), the controller's look at the call after.
              const delivery = deliveryOf(msg)
              setImmediate(() => Queue.unsafeOffer(handedOut, delivery))
            }
          })().catch((e) => log.error({ loop: "controller", ...errorFields(e) }, "controller consumer stopped"))
          return Stream.fromQueue(handedOut)
        })
    })
  )
)
