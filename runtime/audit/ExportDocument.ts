import { Schema } from "effect"
import { HeldEvent } from "../schema/Events.js"
import { PrincipalEntry } from "../schema/Profile.js"
import { JsonValue } from "../schema/Json.js"
import { DocumentSignature } from "../ledger/KernelKey.js"

/** The format tag of `wk audit export` documents. */
export const ExportFormat = "wk.audit.export/v2"

/** The principal registry of one policy epoch: public keys and witness classes only. */
export const RegistryEpoch = Schema.Struct({
  epoch: Schema.Int,
  at: Schema.String,
  principals: Schema.Record({ key: Schema.String, value: PrincipalEntry })
})
export type RegistryEpoch = typeof RegistryEpoch.Type

/**
 * One held call's full history as exported: every event exactly as stored (signed envelopes
 * included), the registry epochs it was judged under, the public keys of every signer, and
 * the deliveries of its result. Verifiable offline with `verifyExport`.
 */
export const ExportDocument = Schema.Struct({
  format: Schema.Literal(ExportFormat),
  held_id: Schema.String,
  stream: Schema.String,
  exported_at: Schema.String,
  /** Every event at its address: the stream sequence of its commit and its index in that commit. */
  events: Schema.Array(Schema.Struct({ seq: Schema.Int, index: Schema.Int, event: HeldEvent })),
  registry: Schema.Array(RegistryEpoch),
  /** Public keys (base64 ed25519) of every principal that signed an event of this call. */
  keys: Schema.Record({ key: Schema.String, value: Schema.Array(Schema.String) }),
  deliveries: Schema.optional(
    Schema.Array(Schema.Struct({ seq: Schema.Int, held_id: Schema.String, delivery_id: Schema.String, outcome: Schema.NullOr(Schema.String), admission: Schema.NullOr(Schema.String), result: JsonValue }))
  ),
  /**
   * The call's commits exactly as stored (their JSON text): each names the digest of the one
   * before (`prev`) and, from a kernel with a signing key, carries the kernel's signature, so the
   * export is evidence without a signature of its own: `verifyExport` checks the chain, the
   * signatures (against the trust root's kernel keys) and that `events` are these commits' events.
   */
  commits: Schema.optional(Schema.Array(Schema.Struct({ seq: Schema.Int, stored: Schema.String }))),
  /**
   * The stream's signed checkpoints that name this call's head in their range, exactly as stored
   * (their JSON text), oldest first: `verifyExport` requires each to verify (by a trust-root kernel
   * key when given) and the exported commits to hold the head each names, and nothing of the call
   * in a checkpoint's range after it, so commits left out up to the newest one are caught.
   */
  checkpoints: Schema.optional(Schema.Array(Schema.Struct({ seq: Schema.Int, stored: Schema.String }))),
  /** sha256 of JCS(events): a receipt to quote when the document is handed over. */
  events_digest: Schema.String,
  /** The kernel key's signature over the rest of the document (`wk audit export --sign-with`). */
  signature: Schema.optional(DocumentSignature)
})
export type ExportDocument = typeof ExportDocument.Type
