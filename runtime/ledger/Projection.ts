import { type Context, Effect, Schema } from "effect"
import { HeldCallFacts } from "../schema/Facts.js"
import { Buckets } from "../schema/Subjects.js"
import { LedgerError, isWrongLastSequence } from "../schema/LedgerError.js"
import { Nats } from "./Nats.js"

/** Facts as stored in the projection bucket, with the KV revision they were read at (0: absent). */
export interface Projected {
  readonly facts: HeldCallFacts
  readonly revision: number
}

const decodeFacts = Schema.decodeUnknownSync(HeldCallFacts)
const encoder = new TextEncoder()

type NatsService = Context.Tag.Service<typeof Nats>

/** Reads the projected facts of a held call, or null when none were projected. */
export const readProjection = (heldId: string) => Effect.flatMap(Nats, (nats) => readProjectionWith(nats, heldId))

/** `readProjection` on a given connection (the held-call store's hot path: no service lookup). */
export const readProjectionWith = (nats: NatsService, heldId: string) =>
  Effect.tryPromise({
    try: async (): Promise<Projected | null> => {
      const kv = await nats.kv(Buckets.facts)
      const e = await kv.get(heldId)
      if (e === null || e.operation !== "PUT" || e.length === 0) return null
      try {
        return { facts: decodeFacts(e.json()), revision: e.revision }
      } catch {
        // Facts another kernel version projected: the stream is the truth, rebuild from it.
        return null
      }
    },
    catch: (cause) => new LedgerError({ operation: `read projection of ${heldId}`, message: String(cause), cause })
  })

const storedSeq = (json: unknown): number => {
  try {
    return decodeFacts(json).last_seq
  } catch {
    return 0
  }
}

/**
 * Writes facts if they are newer than what the bucket holds (revision CAS; a lost race
 * re-reads and keeps whichever facts folded further). The projection can always be rebuilt
 * from the stream, so this never blocks an append.
 */
export const writeProjection = (facts: HeldCallFacts, revision: number) => Effect.flatMap(Nats, (nats) => writeProjectionWith(nats, facts, revision))

/** `writeProjection` on a given connection, as a plain promise (written in the background). */
export const projectFacts = async (nats: NatsService, facts: HeldCallFacts, revision: number): Promise<number> => {
  const kv = await nats.kv(Buckets.facts)
  const data = encoder.encode(JSON.stringify(facts))
  const subject = `$KV.${Buckets.facts}.${facts.held_id}`
  let rev = revision
  for (let i = 0; i < 8; i++) {
    try {
      // kv.create / kv.update on the wire (the key's subject, CAS on its last revision), through
      // the connection's lean publisher; a deleted key's marker is handled below like any revision.
      return (await nats.publish(subject, data, { lastSubjectSequence: rev })).seq
    } catch (e) {
      if (!isWrongLastSequence(e)) throw e
      const cur = await kv.get(facts.held_id)
      if (cur === null) { rev = 0; continue }
      // A stored value this kernel cannot decode counts as nothing folded: replace it.
      const stored = cur.operation === "PUT" && cur.length > 0 ? storedSeq(cur.json()) : 0
      if (stored >= facts.last_seq) return cur.revision
      rev = cur.revision
    }
  }
  return rev
}

/** `projectFacts` as an effect. */
export const writeProjectionWith = (nats: NatsService, facts: HeldCallFacts, revision: number) =>
  Effect.tryPromise({
    try: () => projectFacts(nats, facts, revision),
    catch: (cause) => new LedgerError({ operation: `write projection of ${facts.held_id}`, message: String(cause), cause })
  })
