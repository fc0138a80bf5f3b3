import { Either, Schema } from "effect"
import { readFileSync } from "node:fs"
import { jcsDigest } from "../schema/Canonical.js"
import { auditError, type AuditError } from "./AuditError.js"

const PublicKey = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9+/]{43}=$/))

/** A JSON Web Key Set (RFC 7517), as `jose`'s createLocalJWKSet takes it. */
const Jwks = Schema.Struct({ keys: Schema.Array(Schema.Struct({ kty: Schema.String }, Schema.Record({ key: Schema.String, value: Schema.Unknown }))) })

/**
 * What an auditor holds out of band, never read from the stream it audits (`wk audit replay
 * --trust FILE`): the organization's policy admins and their public keys, the digests of the
 * profile sets the organization loads at start-up (`jcsDigest(profiles)`, the form of a
 * `policy.applied` record's `profiles`), the kernel's public signing keys, and the keys of the
 * OAuth issuers the policy binds. Every registry
 * the replay uses to verify anything derives from this by records that verify (TrustedRegistry).
 */
export const TrustRoot = Schema.Struct({
  format: Schema.Literal("wk.trust/1"),
  admins: Schema.Record({ key: Schema.String, value: Schema.Array(PublicKey) }),
  startup_profiles: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }),
  kernel_keys: Schema.optionalWith(Schema.Array(PublicKey), { default: () => [] }),
  /**
   * The OAuth issuers whose bearer tokens the policy binds (`identities`), each with its JSON Web
   * Key Set as the issuer publishes it (`jwks_uri`): the `bearer-tokens` check verifies the token
   * behind each proposal made on its behalf against these keys, never against keys the stream names.
   */
  issuers: Schema.optional(Schema.Record({ key: Schema.String, value: Jwks }))
})
export type TrustRoot = typeof TrustRoot.Type

/** The digest a trust root lists for a profile set loaded at start-up. */
export const startupDigest = (profiles: unknown): string => jcsDigest(profiles)

/** A trust root from its JSON text; the error names what is wrong. */
export const parseTrustRoot = (text: string, source = "trust root"): Either.Either<TrustRoot, AuditError> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    return Either.left(auditError(`read ${source}`)(`not JSON: ${String(e)}`))
  }
  return Either.mapLeft(Schema.decodeUnknownEither(TrustRoot)(json, { onExcessProperty: "error" }), (e) => auditError(`read ${source}`)(e.message))
}

/** Reads a trust root file. */
export const readTrustRoot = (path: string): Either.Either<TrustRoot, AuditError> => {
  let text: string
  try {
    text = readFileSync(path, "utf8")
  } catch (e) {
    return Either.left(auditError(`read trust root ${path}`)(String(e)))
  }
  return parseTrustRoot(text, path)
}
