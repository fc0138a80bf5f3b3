import { Context, Effect, Layer } from "effect"
import { errors } from "@nats-io/transport-node"
import { Nats } from "./Nats.js"
import { LedgerError } from "../schema/LedgerError.js"
import { Buckets, Subjects } from "../schema/Subjects.js"

/** A parked call to cancel if its session disconnects. */
export interface PresenceMark {
  readonly heldId: string
  readonly sessionId: string
}

/** How long a probe waits: a subscriber that does not answer is still a subscriber. */
const ProbeTimeoutMs = 250

/** The marks of parked calls proposed with `cancel_on_disconnect`, and the probe of a session's presence. */
export class PresenceMarks extends Context.Tag("wk/PresenceMarks")<
  PresenceMarks,
  {
    readonly mark: (heldId: string, sessionId: string) => Effect.Effect<void, LedgerError>
    readonly unmark: (heldId: string) => Effect.Effect<void, LedgerError>
    readonly marks: Effect.Effect<ReadonlyArray<PresenceMark>, LedgerError>
    /**
     * Is anyone subscribed to the session's presence subject? Any doubt counts as present:
     * never cancel on doubt.
     */
    readonly probe: (sessionId: string) => Effect.Effect<"present" | "absent">
  }
>() {}

/** Marks a parked call to be cancelled if its session disconnects (the presence watch reads the marks). */
export const watchSession = (heldId: string, sessionId: string) => Effect.flatMap(PresenceMarks, (p) => p.mark(heldId, sessionId)).pipe(Effect.ignore)

/**
 * Marks in the `wk_presence` KV bucket. A probe is a request with no subscriber failing at once
 * with "no responders"; a live agent's subscription makes it time out (agents need not answer,
 * so they need no publish permission). Only the session's own NATS user may subscribe there
 * (nats.conf: a confined agent its namespace, the shared `agent` login one-token sessions), so
 * no other login can fake presence.
 */
export const layerNatsPresenceMarks = Layer.effect(
  PresenceMarks,
  Effect.map(Nats, ({ kv, nc }) => {
    const on = <A>(operation: string, f: (bucket: Awaited<ReturnType<typeof kv>>) => Promise<A>) =>
      Effect.tryPromise({
        try: async () => f(await kv(Buckets.presence)),
        catch: (cause) => new LedgerError({ operation: `${operation} ${Buckets.presence}`, message: String(cause), cause })
      })
    return PresenceMarks.of({
      mark: (heldId, sessionId) => on("put", (b) => b.put(heldId, sessionId)).pipe(Effect.asVoid),
      unmark: (heldId) => on("delete", (b) => b.delete(heldId)),
      marks: on("list", async (b) => {
        const out: Array<PresenceMark> = []
        // Listing keys opens a consumer: skip it while nothing is watched (the usual case).
        if ((await b.status()).values === 0) return out
        for await (const k of await b.keys()) {
          const e = await b.get(k)
          if (e?.operation === "PUT") out.push({ heldId: k, sessionId: e.string() })
        }
        return out
      }),
      probe: (sessionId) =>
        Effect.promise(() =>
          nc.request(Subjects.presence(sessionId), new Uint8Array(0), { timeout: ProbeTimeoutMs }).then(
            () => "present" as const,
            (e: unknown) => ((e instanceof errors.RequestError && e.isNoResponders()) || e instanceof errors.NoRespondersError ? ("absent" as const) : ("present" as const))
          )
        )
    })
  })
)
