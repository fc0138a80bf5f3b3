import { Effect, Schedule } from "effect"
import { errors } from "@nats-io/transport-node"
import { HeldCallStore } from "../ledger/HeldCallStore.js"
import { Nats } from "../ledger/Nats.js"
import { wake } from "../ledger/Wakes.js"
import { beforeDispatch } from "../heldcall/Facts.js"
import { appendDecided } from "../protocol/internal/appendDecided.js"
import type { CallCancelled } from "../schema/Events.js"
import { Buckets, Subjects } from "../schema/Subjects.js"
import { Driver } from "./Driver.js"
import { eventOf } from "./Actions.js"

/** How long a probe waits: a subscriber that does not answer is still a subscriber. */
const ProbeTimeoutMs = 250

/**
 * Is anyone subscribed to the session's presence subject? A request with no subscriber fails
 * at once with "no responders"; a live agent's subscription makes it time out (agents need not
 * answer, so they need no publish permission). Any other error counts as present: never cancel
 * on doubt. Only the session's own NATS user may subscribe there (nats.conf: a confined agent its
 * namespace, the shared `agent` login one-token sessions), so no other login can fake presence.
 */
export const probeSession = (sessionId: string) =>
  Effect.gen(function* () {
    const { nc } = yield* Nats
    return yield* Effect.promise(() =>
      nc.request(Subjects.presence(sessionId), new Uint8Array(0), { timeout: ProbeTimeoutMs }).then(
        () => "present" as const,
        (e: unknown) => ((e instanceof errors.RequestError && e.isNoResponders()) || e instanceof errors.NoRespondersError ? ("absent" as const) : ("present" as const))
      )
    )
  })

/** Cancels a parked call whose session is gone, unless its effect may have started. */
const cancelForDisconnect = (heldId: string, sessionId: string) =>
  Effect.gen(function* () {
    const { reply } = yield* appendDecided(heldId, (f) => {
      if (f.lifecycle !== "open" || !beforeDispatch(f)) return { reply: { status: 409 } }
      const event = eventOf<typeof CallCancelled.Type>({
        held_id: heldId,
        generation: f.generation,
        type: "call.cancelled",
        event_id: `call.cancelled:${heldId}`,
        by: "kernel",
        reason: `session ${sessionId} disconnected (cancel_on_disconnect)`
      })
      return { reply: { status: 200 }, event }
    })
    if (reply.status === 200) {
      yield* wake(heldId)
      yield* Effect.forkDaemon((yield* Driver).drive(heldId).pipe(Effect.ignore))
    }
  })

/**
 * One pass: probe each watched session once; cancel the parked calls of sessions that are gone,
 * and forget calls that have ended. Several kernels may run it at once: a cancel is idempotent.
 */
export const presencePass = Effect.gen(function* () {
  const { kv } = yield* Nats
  const store = yield* HeldCallStore
  const bucket = yield* Effect.promise(() => kv(Buckets.presence))
  const watched = yield* Effect.promise(async () => {
    const out: Array<{ heldId: string; sessionId: string }> = []
    // Listing keys opens a consumer: skip it while nothing is watched (the usual case).
    if ((await bucket.status()).values === 0) return out
    for await (const k of await bucket.keys()) {
      const e = await bucket.get(k)
      if (e?.operation === "PUT") out.push({ heldId: k, sessionId: e.string() })
    }
    return out
  })
  const sessions = [...new Set(watched.map((w) => w.sessionId))]
  const gone = new Set<string>()
  yield* Effect.forEach(sessions, (s) => probeSession(s).pipe(Effect.map((r) => r === "absent" && gone.add(s))), { concurrency: 32, discard: true })
  yield* Effect.forEach(
    watched,
    ({ heldId, sessionId }) =>
      Effect.gen(function* () {
        if (gone.has(sessionId)) yield* cancelForDisconnect(heldId, sessionId)
        const loaded = yield* store.load(heldId, "cached")
        if (loaded === null || loaded.facts.lifecycle !== "open" || !beforeDispatch(loaded.facts)) yield* Effect.promise(() => bucket.delete(heldId))
      }).pipe(Effect.ignore),
    { concurrency: 16, discard: true }
  )
})

/** Runs a presence pass every `intervalMs` for the life of the kernel. */
export const runPresenceWatch = (intervalMs: number) =>
  presencePass.pipe(Effect.ignore, Effect.repeat(Schedule.spaced(intervalMs)), Effect.forkScoped)
