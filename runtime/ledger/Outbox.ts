import { Context, Effect, Layer } from "effect"
import { Streams, Subjects } from "../schema/Subjects.js"
import { LedgerError } from "../schema/LedgerError.js"
import { Nats } from "./Nats.js"

/** What routes and verifiers are told of a held call (`wk.v1.witness.requests.<held_id>`, kept in `WK_WITNESS`). */
export interface WitnessNotice {
  readonly held_id: string
  readonly generation: number
  readonly expires_at: string
  readonly witness_request: { readonly contract_digest: string; readonly presentation_digest?: string } | null
  readonly reminder?: boolean
}

/** Whether a stored notice tells of the same generation, contract and presentation as `want`. */
export const sameNotice = (stored: Partial<WitnessNotice> | null, want: WitnessNotice): boolean =>
  stored !== null &&
  stored.generation === want.generation &&
  stored.witness_request?.contract_digest === want.witness_request?.contract_digest &&
  stored.witness_request?.presentation_digest === want.witness_request?.presentation_digest

/** What the kernel publishes besides its events: results to agents and notices to witnesses. */
export class Outbox extends Context.Tag("wk/Outbox")<
  Outbox,
  {
    /**
     * Publishes a final result to the session's results stream, durably; the same `messageId`
     * within the stream's duplicate window is stored once.
     */
    readonly deliver: (sessionId: string, body: unknown, messageId: string) => Effect.Effect<void, LedgerError>
    /** Tells witness routes a call waits for them, right after the hold's commit (kept in `WK_WITNESS`). */
    readonly requestWitnesses: (heldId: string, body: WitnessNotice) => Effect.Effect<void>
    /**
     * The reconciler's half of the request: publishes `body` unless the last notice kept for the
     * call already tells of this generation, contract and presentation. The hold's commit is the
     * request; a kernel that died between the commit and `requestWitnesses` loses nothing, because
     * the recovery sweep calls this for every open held call. True when it published.
     */
    readonly ensureWitnessRequest: (heldId: string, body: WitnessNotice) => Effect.Effect<boolean, LedgerError>
  }
>() {}

const encoder = new TextEncoder()

/** Deliveries into `WK_SESSIONS`, witness notices into `WK_WITNESS`. */
export const layerNatsOutbox = Layer.effect(
  Outbox,
  Effect.map(Nats, ({ publish, nc, jsm }) =>
    Outbox.of({
      deliver: (sessionId, body, messageId) =>
        Effect.tryPromise({
          try: () => publish(Subjects.sessionResults(sessionId), encoder.encode(JSON.stringify(body)), { msgID: messageId }),
          catch: (cause) => new LedgerError({ operation: "publish delivery", message: String(cause), cause })
        }).pipe(Effect.asVoid),
      requestWitnesses: (heldId, body) => Effect.sync(() => nc.publish(Subjects.witnessRequests(heldId), JSON.stringify(body))),
      ensureWitnessRequest: (heldId, body) =>
        Effect.tryPromise({
          try: async () => {
            const subject = Subjects.witnessRequests(heldId)
            const last = await jsm.streams.getMessage(Streams.witness, { last_by_subj: subject }).catch(() => null)
            if (last !== null && sameNotice(last.json<Partial<WitnessNotice>>(), body)) return false
            const id = `witness-request:${heldId}:${body.generation}:${body.witness_request?.presentation_digest ?? body.witness_request?.contract_digest ?? ""}`
            await publish(subject, encoder.encode(JSON.stringify(body)), { msgID: id })
            return true
          },
          catch: (cause) => new LedgerError({ operation: "ensure witness request", message: String(cause), cause })
        })
    })
  )
)
