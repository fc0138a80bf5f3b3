import { Context, Effect, Either, Layer, Schema } from "effect"
import { DeliverPolicy } from "@nats-io/jetstream"
import { jcsDigest } from "../schema/Canonical.js"
import { decodeStandingRecord, standingSubjectOf, StandingGrantPayload, type StandingRecord } from "../schema/StandingGrant.js"
import { Streams, Subjects } from "../schema/Subjects.js"
import { LedgerError } from "../schema/LedgerError.js"
import { Nats, PublishError } from "./Nats.js"

/** A grant's newest record, its signed grant decoded, and the stream sequence it is stored at. */
export interface StoredGrant {
  readonly record: StandingRecord
  readonly payload: StandingGrantPayload
  readonly seq: number
}

/**
 * Standing approvals as the ledger keeps them: each grant's records on its own subject of
 * `WK_EVENTS` (`_standing.<grant_id>`), each record the whole state, written with a
 * compare-and-set on the subject's last sequence. `get` reads the truth; `candidates` is this
 * process's view (kept by a watch), used only to pick grants to `get`.
 */
export class StandingGrants extends Context.Tag("wk/StandingGrants")<
  StandingGrants,
  {
    readonly get: (grantId: string) => Effect.Effect<StoredGrant | null, LedgerError>
    /** Stores `record` as its grant's next record if `afterSeq` (0: none) is still the subject's last; null when another write came first. */
    readonly put: (record: StandingRecord, afterSeq: number) => Effect.Effect<StoredGrant | null, LedgerError>
    /** Grants this process knows that are unrevoked and may cover calls of `tool` by `principal`. */
    readonly candidates: (tool: string, principal: string) => ReadonlyArray<StoredGrant>
    /** Every grant this process knows, newest record each. */
    readonly known: () => ReadonlyArray<StoredGrant>
  }
>() {}

const decodeGrant = Schema.decodeUnknownEither(StandingGrantPayload)

/** A record with its grant decoded, or undefined when either does not decode (not the kernel's). */
export const storedGrantOf = (data: Uint8Array | string, seq: number): StoredGrant | undefined => {
  const r = decodeStandingRecord(typeof data === "string" ? data : new TextDecoder().decode(data))
  if (Either.isLeft(r)) return undefined
  const p = decodeGrant(r.right.grant.payload)
  return Either.isRight(p) ? { record: r.right, payload: p.right, seq } : undefined
}

const encode = (record: StandingRecord): Uint8Array => new TextEncoder().encode(JSON.stringify(record))

/** The index of candidates both layers keep: the newest record of each grant this process has seen. */
export const candidateIndex = () => {
  const byId = new Map<string, StoredGrant>()
  return {
    see: (g: StoredGrant) => {
      const had = byId.get(g.record.grant_id)
      if (had === undefined || had.seq < g.seq) byId.set(g.record.grant_id, g)
    },
    candidates: (tool: string, principal: string) =>
      [...byId.values()].filter((g) => g.record.revocation === undefined && g.payload.scope.tool === tool && g.payload.scope.principals.includes(principal)),
    known: () => [...byId.values()]
  }
}

export const makeNatsStandingGrants = Effect.gen(function* () {
  const { js, jsm, publish } = yield* Nats
  const view = candidateIndex()
  const subjectOf = (id: string) => Subjects.events(standingSubjectOf(id))
  const fail = (operation: string) => (cause: unknown) => new LedgerError({ operation, message: cause instanceof Error ? cause.message : String(cause), cause })
  // The watch: an ordered consumer over every grant subject, from the first record. It starts
  // once WK_EVENTS exists (a ledger may be built before provisioning) and ends with the scope.
  let stopped = false
  let close: () => Promise<void> = async () => undefined
  void (async () => {
    while (!stopped) {
      try {
        const messages = await (await js.consumers.get(Streams.events, { filter_subjects: subjectOf("*"), deliver_policy: DeliverPolicy.All })).consume()
        close = () => messages.close().then(() => undefined, () => undefined)
        if (stopped) return void (await close())
        for await (const m of messages) {
          const g = storedGrantOf(m.data, m.seq)
          if (g !== undefined) view.see(g)
        }
        return
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 1_000).unref())
      }
    }
  })()
  yield* Effect.addFinalizer(() =>
    Effect.promise(() => {
      stopped = true
      return close()
    })
  )
  return StandingGrants.of({
    get: (grantId) =>
      Effect.tryPromise({ try: () => jsm.streams.getMessage(Streams.events, { last_by_subj: subjectOf(grantId) }), catch: fail("read a standing approval") }).pipe(
        Effect.map((m) => {
          if (m === null) return null
          const g = storedGrantOf(m.data, m.seq) ?? null
          if (g !== null) view.see(g)
          return g
        })
      ),
    put: (record, afterSeq) =>
      Effect.tryPromise({
        try: async () => {
          try {
            const ack = await publish(subjectOf(record.grant_id), encode(record), { msgID: `standing:${record.grant_id}:${jcsDigest(record)}`, lastSubjectSequence: afterSeq })
            const g = storedGrantOf(JSON.stringify(record), ack.seq)!
            view.see(g)
            return g
          } catch (e) {
            if (e instanceof PublishError && e.code === 10071) return null
            throw e
          }
        },
        catch: fail("store a standing approval")
      }),
    candidates: view.candidates,
    known: view.known
  })
})

/** Over the kernel's NATS connection (`WK_EVENTS` provisioned beforehand). */
export const layerNatsStandingGrants = Layer.scoped(StandingGrants, makeNatsStandingGrants)
