import { Schema } from "effect"
import { canonicalize } from "./Canonical.js"
import type { CommitKey } from "./Commit.js"
import { ed25519Sign, ed25519Verify } from "./Ed25519.js"

/**
 * A kernel signing key handed on, stored on `wk.v1.events._keys` in `WK_EVENTS`: the key `from`
 * signs that `to` signs for the kernel from this record on, and `to` signs it too (it is held,
 * not merely named). Auditors start from the kernel keys of their trust root and follow these
 * records in stream order: a key reached through them is trusted for what is stored after its
 * record. Rotation adds a key; it revokes nothing (a stolen key is removed from the trust root).
 */
export const KeyRotation = Schema.Struct({
  kind: Schema.Literal("key_rotation"),
  from: Schema.String,
  to: Schema.String,
  at: Schema.String,
  sig_from: Schema.String,
  sig_to: Schema.String
})
export type KeyRotation = typeof KeyRotation.Type

/** The subject name (after the events prefix) that rotation records are stored on. */
export const KeyRotationSubject = "_keys"

const signingBytes = (r: { readonly kind: "key_rotation"; readonly from: string; readonly to: string; readonly at: string }): Buffer =>
  Buffer.from(canonicalize({ kind: r.kind, from: r.from, to: r.to, at: r.at }))

/** The record handing `from`'s authority on to `to`, signed by both. */
export const signKeyRotation = (from: CommitKey, to: CommitKey, at: string): KeyRotation => {
  const body = { kind: "key_rotation" as const, from: from.publicKey, to: to.publicKey, at }
  const bytes = signingBytes(body)
  return {
    ...body,
    sig_from: Buffer.from(ed25519Sign(bytes, from.secretKey)).toString("base64"),
    sig_to: Buffer.from(ed25519Sign(bytes, to.secretKey)).toString("base64")
  }
}

/** Whether both signatures of a rotation record verify. */
export const keyRotationValid = (r: KeyRotation): boolean => {
  const bytes = signingBytes(r)
  return (
    ed25519Verify(bytes, Buffer.from(r.sig_from, "base64"), Buffer.from(r.from, "base64")) &&
    ed25519Verify(bytes, Buffer.from(r.sig_to, "base64"), Buffer.from(r.to, "base64"))
  )
}

export const decodeKeyRotation = Schema.decodeUnknownEither(Schema.parseJson(KeyRotation))
