import { Effect } from "effect"
import { openObjectReader } from "../ledger/ObjectReader.js"
import { sha256Hex } from "../schema/Canonical.js"
import { AuditError } from "./AuditError.js"
import type { LedgerError } from "../schema/LedgerError.js"

const asAuditError = (e: LedgerError) => new AuditError({ operation: e.operation, message: e.message, cause: e })

/** What the object store holds under a digest: the bytes, none, or bytes of another digest. */
export type PinnedWasm =
  | { readonly kind: "found"; readonly bytes: Uint8Array }
  | { readonly kind: "absent" }
  | { readonly kind: "swapped"; readonly actual: string }

/**
 * A read-only loader of pinned plugin wasm (`wasm/<sha256>` in the plugin object store), for
 * auditors: it opens the bucket without creating it and reports bytes that do not hash to the
 * digest they are stored under instead of using them. Loads are cached per digest.
 */
export const makePinnedWasmLoader = (bucket: string) =>
  Effect.gen(function* () {
    const os = yield* openObjectReader(bucket).pipe(Effect.mapError(asAuditError))
    const cache = new Map<string, PinnedWasm>()
    return (sha256: string): Effect.Effect<PinnedWasm, AuditError> =>
      Effect.suspend(() => {
        const hit = cache.get(sha256)
        if (hit !== undefined) return Effect.succeed(hit)
        return os.get(`wasm/${sha256}`).pipe(
          Effect.mapError(asAuditError),
          Effect.map((bytes): PinnedWasm => {
            if (bytes === null) return { kind: "absent" }
            const actual = sha256Hex(bytes)
            return actual === sha256 ? { kind: "found", bytes } : { kind: "swapped", actual }
          }),
          Effect.tap((r) => Effect.sync(() => cache.set(sha256, r)))
        )
      })
  })
