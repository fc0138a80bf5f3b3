import { Effect } from "effect"
import { LedgerReader } from "./LedgerReader.js"
import { LedgerError } from "../schema/LedgerError.js"

/** A read-only view of one JetStream object store bucket: the auditor's way to archives and plugin bytes. */
export interface ObjectReader {
  /** The object's bytes, or null when the bucket holds no such object. */
  readonly get: (name: string) => Effect.Effect<Uint8Array | null, LedgerError>
}

const ledgerError = (operation: string) => (cause: unknown) =>
  new LedgerError({ operation, message: `${operation}: ${cause instanceof Error ? cause.message : String(cause)}`, cause })

/** Opens an existing bucket (never creates one). */
export const openObjectReader = (bucket: string): Effect.Effect<ObjectReader, LedgerError, LedgerReader> =>
  Effect.gen(function* () {
    const reader = yield* LedgerReader
    const os = yield* Effect.tryPromise({ try: () => reader.objects(bucket), catch: ledgerError(`open object store ${bucket}`) })
    return {
      get: (name) => Effect.tryPromise({ try: () => os.getBlob(name), catch: ledgerError(`read ${name} from ${bucket}`) })
    }
  })
