import { Effect, Schedule } from "effect"
import { HeldCallStore } from "../ledger/HeldCallStore.js"
import { PresenceMarks } from "../ledger/PresenceMarks.js"
import { beforeDispatch } from "../heldcall/Facts.js"
import { HeldCalls } from "./HeldCalls.js"

/**
 * Is anyone subscribed to the session's presence subject? Any doubt counts as present: never
 * cancel on doubt (ledger/PresenceMarks.ts says how the probe tells).
 */
export const probeSession = (sessionId: string) => Effect.flatMap(PresenceMarks, (p) => p.probe(sessionId))

/** Cancels a parked call whose session is gone, unless its effect may have started (heldcall/decide/Cancel.ts). */
const cancelForDisconnect = (heldId: string, sessionId: string) => Effect.flatMap(HeldCalls, (calls) => calls.handle(heldId, { _tag: "Disconnect", sessionId }))

/**
 * One pass: probe each watched session once; cancel the parked calls of sessions that are gone,
 * and forget calls that have ended. Several kernels may run it at once: a cancel is idempotent.
 */
export const presencePass = Effect.gen(function* () {
  const presence = yield* PresenceMarks
  const store = yield* HeldCallStore
  const watched = yield* presence.marks
  const sessions = [...new Set(watched.map((w) => w.sessionId))]
  const gone = new Set<string>()
  yield* Effect.forEach(sessions, (s) => probeSession(s).pipe(Effect.map((r) => r === "absent" && gone.add(s))), { concurrency: 32, discard: true })
  yield* Effect.forEach(
    watched,
    ({ heldId, sessionId }) =>
      Effect.gen(function* () {
        if (gone.has(sessionId)) yield* cancelForDisconnect(heldId, sessionId)
        const loaded = yield* store.load(heldId, "cached")
        if (loaded === null || loaded.facts.lifecycle !== "open" || !beforeDispatch(loaded.facts)) yield* presence.unmark(heldId)
      }).pipe(Effect.ignore),
    { concurrency: 16, discard: true }
  )
})

/** Runs a presence pass every `intervalMs` for the life of the kernel. */
export const runPresenceWatch = (intervalMs: number) =>
  presencePass.pipe(Effect.ignore, Effect.repeat(Schedule.spaced(intervalMs)), Effect.forkScoped)
