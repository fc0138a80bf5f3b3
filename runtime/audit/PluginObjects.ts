import { Effect } from "effect"
import { Objm } from "@nats-io/obj"
import { Nats } from "../ledger/Nats.js"
import { sha256Hex } from "../schema/Canonical.js"
import { auditError, type AuditError } from "./AuditError.js"

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
    const { nc } = yield* Nats
    const os = yield* Effect.tryPromise({ try: () => new Objm(nc).open(bucket), catch: auditError(`open object store ${bucket}`) })
    const cache = new Map<string, PinnedWasm>()
    return (sha256: string): Effect.Effect<PinnedWasm, AuditError> =>
      Effect.suspend(() => {
        const hit = cache.get(sha256)
        if (hit !== undefined) return Effect.succeed(hit)
        return Effect.tryPromise({ try: () => os.getBlob(`wasm/${sha256}`), catch: auditError(`read wasm/${sha256} from ${bucket}`) }).pipe(
          Effect.map((bytes): PinnedWasm => {
            if (bytes === null) return { kind: "absent" }
            const actual = sha256Hex(bytes)
            return actual === sha256 ? { kind: "found", bytes } : { kind: "swapped", actual }
          }),
          Effect.tap((r) => Effect.sync(() => cache.set(sha256, r)))
        )
      })
  })
