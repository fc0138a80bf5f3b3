import { Schema } from "effect"
import { createLocalJWKSet, jwtVerify, type JSONWebKeySet } from "jose"
import { behalfRefusal, bindingsOf } from "../../policy/IdentityBindings.js"
import { OnBehalfOf } from "../../schema/IdentityBinding.js"
import type { Traced } from "../HeldHistory.js"
import { collector, type CheckContext, type Finding } from "./Check.js"

const isBehalf = Schema.is(OnBehalfOf)

/** Signature algorithms a token may carry: asymmetric only (a shared secret would let its holder mint tokens). */
export const AsymmetricAlgorithms = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"]

/** A recorded proposal made on behalf of a bearer token. */
export interface BehalfProposal {
  readonly heldId: string
  readonly seq: number
  /** The event's time (ISO 8601). */
  readonly at: string
  readonly principal: string
  /** Undefined: the recorded `on_behalf_of` does not decode. */
  readonly behalf: OnBehalfOf | undefined
}

/** The proposals of a call that name the token they were made for (`on_behalf_of` in the signed payload). */
export const behalfProposalsOf = (call: Traced): ReadonlyArray<BehalfProposal> => {
  const out: Array<BehalfProposal> = []
  for (const { seq, event } of call.steps) {
    if (event.type !== "call.proposed" || event.envelope === undefined) continue
    const behalf = event.envelope.payload["on_behalf_of"]
    if (behalf === undefined) continue
    out.push({ heldId: call.heldId, seq, at: event.at, principal: event.principal, behalf: isBehalf(behalf) ? behalf : undefined })
  }
  return out
}

/**
 * `bearer-tokens`: every proposal the MCP endpoint signed on behalf of a bearer token names a
 * token that verifies against its issuer's keys as the trust root lists them (`issuers`:
 * issuer URL -> JWKS; asymmetric algorithms only), was valid when the proposal was stored, has
 * the issuer and subject the proposal names, and is mapped to the proposing principal by the
 * identity bindings in force there. The kernel checked the same when it accepted the proposal;
 * this re-checks it from keys the auditor holds, so a kernel that accepted a forged token is caught.
 * Without the issuer in the trust root the call is unverifiable: a violation when a trust root
 * is given (it must name every issuer the policy binds), unverified otherwise.
 */
export const bearerTokenCheck = async (
  proposals: ReadonlyArray<BehalfProposal>,
  ctx: CheckContext,
  issuers: Readonly<Record<string, JSONWebKeySet>> | undefined,
  rooted: boolean
): Promise<ReadonlyArray<Finding>> => {
  const sets = new Map<string, ReturnType<typeof createLocalJWKSet>>()
  const keysOf = (issuer: string) => {
    const jwks = issuers?.[issuer]
    if (jwks === undefined) return undefined
    let set = sets.get(issuer)
    if (set === undefined) sets.set(issuer, (set = createLocalJWKSet(jwks)))
    return set
  }
  const out: Array<Finding> = []
  for (const p of proposals) {
    const c = collector("bearer-tokens", p.heldId)
    c.count()
    if (p.behalf === undefined) {
      c.fail([p.seq], `the proposal of ${p.principal} carries an on_behalf_of that does not decode`)
      out.push(c.done())
      continue
    }
    const behalf = p.behalf
    const what = `the proposal of ${p.principal} on behalf of ${p.behalf.issuer} '${p.behalf.subject}'`
    const keys = keysOf(behalf.issuer)
    const storedMs = ctx.storedAt?.(p.seq) || Date.parse(p.at)
    if (keys === undefined) {
      const why = `${what} is unverifiable: the trust root names no keys for issuer ${JSON.stringify(behalf.issuer)}`
      if (rooted) c.fail([p.seq], why)
      else c.unsure([p.seq], `${why} (pass --trust with issuers)`)
      out.push(c.done())
      continue
    }
    try {
      await jwtVerify(behalf.token, keys, { issuer: behalf.issuer, subject: behalf.subject, algorithms: AsymmetricAlgorithms, currentDate: new Date(storedMs) })
    } catch (e) {
      c.fail([p.seq], `${what}: the token does not verify against the trust root's keys for its issuer at ${new Date(storedMs).toISOString()} (${e instanceof Error ? e.message : String(e)})`)
      out.push(c.done())
      continue
    }
    const inForce = ctx.policy.registryAt(p.seq, p.at, ctx.storedAt?.(p.seq) ?? 0)
    if (inForce.length === 0) c.unsure([p.seq], `${what}: no policy record before seq ${p.seq}; cannot tell which bindings were in force`)
    else {
      const refusals = inForce.map((e) => behalfRefusal(bindingsOf(e.policy.profiles), p.principal, behalf, storedMs))
      if (!refusals.some((r) => r === undefined)) c.fail([p.seq], `${what}: ${refusals[0]} (epochs ${inForce.map((e) => e.epoch).join(", ")})`)
    }
    out.push(c.done())
  }
  return out
}
