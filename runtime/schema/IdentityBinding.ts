import { Schema } from "effect"

/** An OAuth issuer as tokens name it (`iss`): an https URL, or http on a loopback host for development. */
const IssuerUrl = Schema.String.pipe(
  Schema.maxLength(300),
  Schema.pattern(/^(https:\/\/[^\s]+|http:\/\/(127\.0\.0\.1|localhost|\[::1\])(:\d+)?(\/[^\s]*)?)$/, { message: () => "expected an https:// issuer URL (http:// only on a loopback host)" })
)

const Claim = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(300))

/**
 * One binding of the policy's `identities`: bearer tokens from `issuer`, for `audience` (the
 * governed MCP endpoint's resource URL), whose subject is `subject` (or whose `groups` claim
 * lists `group`), act as `principal`: the MCP endpoint (`wk mcp serve --http`) signs their
 * proposals with the principal's key, and the kernel accepts a proposal that names such a token
 * only when a binding in force maps it to the proposal's principal. The principal acts with the
 * classes the policy registers for it; a binding adds none. A binding gives the token's holder
 * every power of the principal, so a new binding is a widening (runtime/policy/Authority.ts).
 */
export const IdentityBinding = Schema.Union(
  Schema.Struct({ issuer: IssuerUrl, audience: Claim, subject: Claim, principal: Schema.String.pipe(Schema.pattern(/^[a-z]+:[A-Za-z0-9_.-]+$/)) }),
  Schema.Struct({ issuer: IssuerUrl, audience: Claim, group: Claim, principal: Schema.String.pipe(Schema.pattern(/^[a-z]+:[A-Za-z0-9_.-]+$/)) })
)
export type IdentityBinding = typeof IdentityBinding.Type

/**
 * Who stood behind a proposal the MCP endpoint signed: the verified bearer token itself (a JWT,
 * so the kernel and an auditor can read its claims and an auditor can verify its signature
 * against the issuer's keys) and, for people reading the record, its issuer and subject.
 */
export const OnBehalfOf = Schema.Struct({
  issuer: Schema.String.pipe(Schema.maxLength(300)),
  subject: Claim,
  token: Schema.String.pipe(Schema.maxLength(8192), Schema.pattern(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/, { message: () => "expected a compact JWS (header.payload.signature)" }))
})
export type OnBehalfOf = typeof OnBehalfOf.Type
