import { decodeJwt } from "jose"
import type { IdentityBinding, OnBehalfOf } from "../schema/IdentityBinding.js"
import type { Profile } from "../schema/Profile.js"

/** The claims of a bearer token the bindings read: issuer, subject, audiences, groups, lifetime. */
export interface TokenClaims {
  readonly issuer: string
  readonly subject: string
  readonly audiences: ReadonlyArray<string>
  /** The `groups` claim (an array of strings; absent: none). */
  readonly groups: ReadonlyArray<string>
  /** Seconds since the epoch. */
  readonly expiresAt: number | undefined
  readonly issuedAt: number | undefined
}

/** The claims of a JWT, read without verifying its signature (a verifier or auditor does that), or why not. */
export const claimsOf = (token: string): TokenClaims | string => {
  let c: ReturnType<typeof decodeJwt>
  try {
    c = decodeJwt(token)
  } catch (e) {
    return `the token is not a JWT (${e instanceof Error ? e.message : String(e)})`
  }
  if (typeof c.iss !== "string" || typeof c.sub !== "string") return "the token names no issuer (iss) or subject (sub)"
  const groups = Array.isArray(c["groups"]) ? (c["groups"] as ReadonlyArray<unknown>).filter((g): g is string => typeof g === "string") : []
  return {
    issuer: c.iss,
    subject: c.sub,
    audiences: typeof c.aud === "string" ? [c.aud] : (c.aud ?? []),
    groups,
    expiresAt: c.exp,
    issuedAt: c.iat
  }
}

/** Every identity binding of the merged profiles (the union: each profile's bindings hold). */
export const bindingsOf = (profiles: ReadonlyArray<Profile>): ReadonlyArray<IdentityBinding> => profiles.flatMap((p) => p.identities ?? [])

/** Whether `binding` maps a token with `claims` (its issuer, one of its audiences, its subject or one of its groups). */
export const bindingAdmits = (binding: IdentityBinding, claims: TokenClaims): boolean =>
  binding.issuer === claims.issuer && claims.audiences.includes(binding.audience) && ("subject" in binding ? binding.subject === claims.subject : claims.groups.includes(binding.group))

/**
 * The principals `bindings` map a token with `claims` to: those bound to its subject if any
 * (a subject binding names one client exactly), else those bound to one of its groups.
 */
export const principalsFor = (bindings: ReadonlyArray<IdentityBinding>, claims: TokenClaims): ReadonlyArray<string> => {
  const admitted = bindings.filter((b) => bindingAdmits(b, claims))
  const bySubject = admitted.filter((b) => "subject" in b)
  return [...new Set((bySubject.length > 0 ? bySubject : admitted).map((b) => b.principal))].sort()
}

/** What a binding's holder may do, in words (the authority model's power). */
export const bindingWhat = (b: IdentityBinding): string =>
  `acts for bearer tokens of ${b.issuer} for ${b.audience} ${"subject" in b ? `with subject '${b.subject}'` : `in group '${b.group}'`}`

/** The authority model's key of a binding's power. */
export const bindingKey = (b: IdentityBinding): string => `identity:${JSON.stringify([b.issuer, b.audience, "subject" in b ? `sub:${b.subject}` : `group:${b.group}`])}`

/**
 * Why a proposal of `principal` on behalf of `behalf` is refused under `bindings` at `nowMs`, or
 * undefined when it stands: the token's claims must be the ones named, it must not be expired,
 * and a binding must map it to `principal` (and to no other principal). A principal that some
 * binding names proposes only on behalf of a token: its key is held by the MCP endpoint, which
 * signs for no one else.
 */
export const behalfRefusal = (bindings: ReadonlyArray<IdentityBinding>, principal: string, behalf: OnBehalfOf | undefined, nowMs: number): string | undefined => {
  if (behalf === undefined)
    return bindings.some((b) => b.principal === principal) ? `${principal} is bound to bearer tokens (policy identities): its proposals name the token they were made for (on_behalf_of)` : undefined
  const claims = claimsOf(behalf.token)
  if (typeof claims === "string") return `on_behalf_of: ${claims}`
  if (claims.issuer !== behalf.issuer || claims.subject !== behalf.subject) return `on_behalf_of: the token's issuer and subject are ${claims.issuer} '${claims.subject}', not ${behalf.issuer} '${behalf.subject}'`
  if (claims.expiresAt === undefined || claims.expiresAt * 1000 <= nowMs) return `on_behalf_of: the token of ${claims.issuer} '${claims.subject}' has expired`
  const principals = principalsFor(bindings, claims)
  if (!principals.includes(principal)) return `on_behalf_of: no identity binding in force maps ${claims.issuer} '${claims.subject}' to ${principal}`
  if (principals.length > 1) return `on_behalf_of: the bindings map ${claims.issuer} '${claims.subject}' to ${principals.join(", ")}: a token must act as one principal`
  return undefined
}
