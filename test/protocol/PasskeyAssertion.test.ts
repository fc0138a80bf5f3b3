import { describe, expect, it } from "vitest"
import { Either } from "effect"
import { verifyAuthenticationResponse } from "@simplewebauthn/server"
import { passkeyBoundTo, passkeyChallenge, verifyPasskeyAssertion } from "../../runtime/schema/PasskeyAssertion.js"
import { envelopeSignatureValid } from "../../runtime/schema/EnvelopeSignature.js"
import { authenticate } from "../../runtime/protocol/Authenticate.js"
import { activePolicy } from "../../runtime/policy/ActivePolicy.js"
import { judgeCounter } from "../../runtime/ledger/PasskeyCounters.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { softPasskey, type SoftPasskey } from "../support/SoftPasskey.js"

const attestation = (over: Record<string, unknown> = {}) => ({
  op: "attest",
  principal: "user:carol",
  class: "human",
  held_id: "h_0123456789abcdef0123456789abcdef",
  generation: 1,
  call_digest: "a".repeat(64),
  contract_digest: "b".repeat(64),
  presentation_digest: "c".repeat(64),
  decision: "approve",
  nonce: "n-passkey-0001",
  issued_at: "2026-01-01T00:00:00.000Z",
  expires_at: "2026-01-01T00:10:00.000Z",
  ...over
})

const policyWith = (pk: SoftPasskey | undefined) => {
  const profile: Profile = { name: "p", principals: { "user:carol": { keys: [], classes: ["human"], ...(pk ? { passkeys: [pk.entry] } : {}) } } }
  return activePolicy(1, [profile])
}

const reasonOf = (e: Either.Either<unknown, { status: number } & Record<string, unknown>>) =>
  Either.isLeft(e) ? `${e.left.status} ${String((e.left["error"] as { message: string }).message)}` : "accepted"

describe("passkey assertions (the registry-free check)", () => {
  for (const alg of [-7, -8] as const) {
    it(`an ${alg === -7 ? "ES256" : "Ed25519"} assertion over the payload's digest verifies, and the library's own verifier agrees`, async () => {
      const pk = softPasskey({ alg })
      const env = pk.sign(attestation())
      const v = verifyPasskeyAssertion(env)
      expect(v.ok).toBe(true)
      expect(envelopeSignatureValid(env)).toBe(true)
      if (v.ok) expect(passkeyBoundTo(v.assertion, env.key, pk.entry)).toBeNull()
      const lib = await verifyAuthenticationResponse({
        response: {
          id: pk.entry.id,
          rawId: pk.entry.id,
          type: "public-key",
          clientExtensionResults: {},
          response: { authenticatorData: env.webauthn!.authenticator_data, clientDataJSON: env.webauthn!.client_data_json, signature: Buffer.from(env.sig, "base64").toString("base64url") }
        },
        expectedChallenge: passkeyChallenge(env.payload),
        expectedOrigin: pk.entry.origin,
        expectedRPID: pk.entry.rp_id,
        requireUserVerification: true,
        credential: { id: pk.entry.id, publicKey: new Uint8Array(Buffer.from(pk.entry.public_key, "base64")), counter: 0 }
      })
      expect(lib.verified).toBe(true)
      expect(lib.authenticationInfo.newCounter).toBe(1)
    })
  }

  it("an assertion for another generation or another presentation does not sign this payload", () => {
    const pk = softPasskey()
    const signed = pk.sign(attestation())
    for (const other of [attestation({ generation: 2 }), attestation({ presentation_digest: "d".repeat(64) }), attestation({ decision: "reject" })]) {
      const moved = { ...signed, payload: other as never }
      expect(verifyPasskeyAssertion(moved)).toEqual({ ok: false, reason: "the assertion's challenge is not the digest of this payload" })
      expect(envelopeSignatureValid(moved)).toBe(false)
    }
  })

  it("without user verification, with another type, or with a signature that does not verify: refused", () => {
    const pk = softPasskey()
    expect(verifyPasskeyAssertion(pk.sign(attestation(), { uv: false }))).toMatchObject({ ok: false, reason: expect.stringContaining("UV flag") })
    expect(verifyPasskeyAssertion(pk.sign(attestation(), { type: "webauthn.create" }))).toMatchObject({ ok: false, reason: expect.stringContaining("webauthn.get") })
    const env = pk.sign(attestation())
    const other = softPasskey()
    expect(verifyPasskeyAssertion({ ...env, key: other.entry.public_key })).toMatchObject({ ok: false, reason: expect.stringContaining("does not verify") })
  })

  it("another origin or another rp id is not what the passkey is registered for", () => {
    const pk = softPasskey({ origin: "http://localhost:8080" })
    for (const [over, why] of [[{ origin: "http://localhost:9090" }, "origin"], [{ rpId: "evil.example" }, "relying party"]] as const) {
      const v = verifyPasskeyAssertion(pk.sign(attestation(), over))
      expect(v.ok).toBe(true)
      if (v.ok) expect(passkeyBoundTo(v.assertion, pk.entry.public_key, pk.entry)).toContain(why)
    }
  })
})

describe("authenticating a passkey's request (kernel)", () => {
  it("counts only a registered credential, on its origin, for attest", () => {
    const pk = softPasskey()
    const env = pk.sign(attestation())
    expect(reasonOf(authenticate(env, "attest", policyWith(pk)))).toBe("accepted")
    // Removed from the registry: refused.
    expect(reasonOf(authenticate(env, "attest", policyWith(undefined)))).toMatch(/^401 passkey .* is not registered to principal 'user:carol'/)
    // Another origin (same rp id, another port): refused.
    expect(reasonOf(authenticate(pk.sign(attestation(), { origin: "http://localhost:9090" }), "attest", policyWith(pk)))).toMatch(/^401 the assertion was made on origin "http:\/\/localhost:9090"/)
    // An assertion moved onto another generation's payload: refused.
    expect(reasonOf(authenticate({ ...env, payload: attestation({ generation: 2 }) as never }, "attest", policyWith(pk)))).toBe("401 the assertion's challenge is not the digest of this payload")
    // A passkey signs attestations only.
    expect(reasonOf(authenticate(pk.sign({ ...attestation(), op: "cancel" }), "cancel", policyWith(pk)))).toBe("401 a passkey signs only attest, not 'cancel'")
    // A passkey's key is not an ed25519 key: the same bytes without the assertion are refused.
    const { webauthn: _, ...bare } = env
    expect(reasonOf(authenticate(bare, "attest", policyWith(pk)))).toBe("401 key is not registered to principal 'user:carol'")
  })

  it("the signature counter: up is taken, equal or lower refused, the same assertion again passes to the duplicate check, no counter (0) always", () => {
    expect(judgeCounter(undefined, 5, "a")).toEqual({ ok: true, write: true })
    expect(judgeCounter({ counter: 5, assertion: "a" }, 6, "b")).toEqual({ ok: true, write: true })
    expect(judgeCounter({ counter: 5, assertion: "a" }, 5, "b")).toEqual({ ok: false, last: 5, write: false })
    expect(judgeCounter({ counter: 5, assertion: "a" }, 4, "b")).toEqual({ ok: false, last: 5, write: false })
    expect(judgeCounter({ counter: 5, assertion: "a" }, 5, "a")).toEqual({ ok: true, write: false })
    expect(judgeCounter({ counter: 6, assertion: "b" }, 5, "a")).toEqual({ ok: false, last: 6, write: false })
    expect(judgeCounter({ counter: 0, assertion: "a" }, 0, "b")).toEqual({ ok: true, write: true })
    expect(judgeCounter({ counter: 3, assertion: "a" }, 0, "b")).toEqual({ ok: false, last: 3, write: false })
  })
})
