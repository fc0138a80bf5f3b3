import { createLocalJWKSet, createRemoteJWKSet, decodeJwt, errors, jwtVerify, type JSONWebKeySet, type JWTVerifyGetKey } from "jose"
import { claimsOf, type TokenClaims } from "../../policy/IdentityBindings.js"

/** An identity provider whose tokens the endpoint accepts: its issuer and where its signing keys are. */
export interface TrustedIssuer {
  readonly issuer: string
  /** Its JWKS; default: the `jwks_uri` of its discovery document (OpenID or RFC 8414 metadata). */
  readonly jwksUri?: string
}

/** A bearer token whose signature, issuer, audience and lifetime verified. */
export interface VerifiedToken {
  readonly token: string
  readonly claims: TokenClaims
  /** `client_id` (RFC 9068), else `azp`, else the subject. */
  readonly clientId: string
  readonly scopes: ReadonlyArray<string>
  readonly expiresAt: number
}

/** Why a token is refused: `invalid_token` in the WWW-Authenticate challenge (RFC 6750). */
export interface TokenRefusal {
  readonly refused: string
}

/** Signature algorithms accepted: asymmetric only (a shared secret would let the endpoint mint tokens). */
const Algorithms = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"]

const discoveryPaths = [".well-known/openid-configuration", ".well-known/oauth-authorization-server"]

/** The `jwks_uri` an issuer's discovery document names. */
export const discoverJwksUri = async (issuer: string, fetchFn: typeof fetch = fetch): Promise<string> => {
  const base = issuer.endsWith("/") ? issuer : `${issuer}/`
  for (const path of discoveryPaths) {
    const r = await fetchFn(new URL(path, base)).catch(() => null)
    if (r === null || !r.ok) continue
    const doc = (await r.json().catch(() => null)) as { issuer?: unknown; jwks_uri?: unknown } | null
    if (doc !== null && doc.issuer === issuer && typeof doc.jwks_uri === "string") return doc.jwks_uri
  }
  throw new Error(`issuer ${issuer}: no discovery document names its jwks_uri (give jwks_uri)`)
}

/**
 * Verifies bearer tokens for one protected resource (`audience`, the endpoint's resource URL):
 * a JWT signed by a key of its issuer's JWKS (fetched and cached by `jose`, refetched on an
 * unknown key id), issued by one of `issuers`, for `audience`, with a subject and an expiry not
 * yet past. Anything else is refused with the reason.
 */
export class TokenVerifier {
  private readonly keys = new Map<string, Promise<JWTVerifyGetKey>>()

  constructor(
    private readonly issuers: ReadonlyArray<TrustedIssuer>,
    readonly audience: string,
    private readonly localKeys?: ReadonlyMap<string, JSONWebKeySet>
  ) {}

  private keysOf(issuer: TrustedIssuer): Promise<JWTVerifyGetKey> {
    const known = this.keys.get(issuer.issuer)
    if (known !== undefined) return known
    const local = this.localKeys?.get(issuer.issuer)
    const keys = local !== undefined ? Promise.resolve(createLocalJWKSet(local)) : (issuer.jwksUri !== undefined ? Promise.resolve(issuer.jwksUri) : discoverJwksUri(issuer.issuer)).then((uri) => createRemoteJWKSet(new URL(uri)))
    // A failed discovery is tried again on the next token.
    keys.catch(() => this.keys.delete(issuer.issuer))
    this.keys.set(issuer.issuer, keys)
    return keys
  }

  async verify(token: string): Promise<VerifiedToken | TokenRefusal> {
    let iss: unknown
    try {
      iss = decodeJwt(token).iss
    } catch {
      return { refused: "the bearer token is not a JWT" }
    }
    const issuer = this.issuers.find((i) => i.issuer === iss)
    if (issuer === undefined) return { refused: `tokens of issuer ${String(iss)} are not accepted here` }
    try {
      const keys = await this.keysOf(issuer)
      const { payload } = await jwtVerify(token, keys, { issuer: issuer.issuer, audience: this.audience, algorithms: Algorithms, requiredClaims: ["exp", "sub"] })
      const claims = claimsOf(token)
      if (typeof claims === "string") return { refused: claims }
      const scope = typeof payload["scope"] === "string" ? payload["scope"].split(" ").filter((s) => s !== "") : []
      const clientId = typeof payload["client_id"] === "string" ? payload["client_id"] : typeof payload["azp"] === "string" ? payload["azp"] : claims.subject
      return { token, claims, clientId, scopes: scope, expiresAt: payload.exp! }
    } catch (e) {
      if (e instanceof errors.JWTExpired) return { refused: "the token has expired" }
      if (e instanceof errors.JWTClaimValidationFailed) return { refused: e.claim === "aud" ? `the token is not for this resource (${this.audience})` : `the token's ${e.claim} claim is not accepted: ${e.message}` }
      if (e instanceof errors.JWSSignatureVerificationFailed || e instanceof errors.JWKSNoMatchingKey) return { refused: `the token's signature does not verify with a key of ${issuer.issuer}` }
      return { refused: `the token does not verify: ${e instanceof Error ? e.message : String(e)}` }
    }
  }
}
