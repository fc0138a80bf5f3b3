import { Effect } from "effect"
import type { CommitKey } from "../schema/Commit.js"
import { KeyRotationSubject, signKeyRotation, type KeyRotation } from "../schema/KeyRotation.js"
import { Subjects } from "../schema/Subjects.js"
import { LedgerError } from "../schema/LedgerError.js"
import { Nats } from "./Nats.js"

/** Stores the record handing `from`'s signing authority on to `to` (`wk audit key --rotate`); returns it with its sequence. */
export const recordKeyRotation = (from: CommitKey, to: CommitKey, now: Date): Effect.Effect<{ readonly rotation: KeyRotation; readonly seq: number }, LedgerError, Nats> =>
  Effect.gen(function* () {
    const { publish } = yield* Nats
    const rotation = signKeyRotation(from, to, now.toISOString())
    const ack = yield* Effect.tryPromise({
      try: () => publish(Subjects.events(KeyRotationSubject), new TextEncoder().encode(JSON.stringify(rotation)), { msgID: `key_rotation:${rotation.to}` }),
      catch: (cause) => new LedgerError({ operation: "store a key rotation", message: cause instanceof Error ? cause.message : String(cause), cause })
    })
    return { rotation, seq: ack.seq }
  })
