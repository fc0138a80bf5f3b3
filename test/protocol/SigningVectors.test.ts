import { describe, expect, it } from "vitest"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import nacl from "tweetnacl"
import canonicalizeLib from "canonicalize"
import { envelopeSignatureValid } from "../../runtime/schema/EnvelopeSignature.js"
import { createHash, createPrivateKey, createPublicKey, verify } from "node:crypto"
import { passkeyChallenge, verifyPasskeyAssertion } from "../../runtime/schema/PasskeyAssertion.js"
import type { Envelope } from "../../runtime/schema/Envelope.js"
import { passkeyVectors, signingVectors, type PasskeyVector, type SigningVector } from "./signingVectors.js"

// docs/signing-vectors.json is what a client in another language checks itself against. These
// tests keep it equal to what the kernel's own code computes, and check each vector by a second
// route (tweetnacl, the `canonicalize` package), so the file can neither drift nor be wrong.
const file = JSON.parse(readFileSync(join(import.meta.dirname, "..", "..", "docs", "signing-vectors.json"), "utf8")) as { format: string; vectors: Array<SigningVector>; passkey_vectors: Array<PasskeyVector> }

describe("docs/signing-vectors.json", () => {
  it("is what the kernel's code computes today (regenerate: npx tsx test/protocol/writeSigningVectors.ts)", () => {
    expect(file.format).toBe("wk.signing-vectors/1")
    expect(file.vectors).toEqual(JSON.parse(JSON.stringify(signingVectors())))
  })

  it.each(file.vectors.map((v) => [v.name, v] as const))("%s: the JCS, its bytes, the key from the seed and the signature check out by a second route", (_name, v) => {
    expect(canonicalizeLib(v.payload)).toBe(v.jcs)
    expect(Buffer.from(v.jcs, "utf8").toString("hex")).toBe(v.jcs_utf8_hex)
    const kp = nacl.sign.keyPair.fromSeed(new Uint8Array(Buffer.from(v.seed, "base64")))
    expect(Buffer.from(kp.publicKey).toString("base64")).toBe(v.key)
    expect(nacl.sign.detached.verify(Buffer.from(v.jcs, "utf8"), Buffer.from(v.sig, "base64"), kp.publicKey)).toBe(true)
    expect(envelopeSignatureValid({ payload: v.payload as never, key: v.key, sig: v.sig })).toBe(true)
    // Standard base64 (RFC 4648 section 4, with padding), never URL-safe.
    for (const b of [v.seed, v.key, v.sig]) expect(b).toMatch(/^[A-Za-z0-9+/]+={0,2}$/)
    expect(v.payload_digest).toMatch(/^[0-9a-f]{64}$/)
  })

  it("a signature over other bytes (the payload as JSON.stringify writes it, not its JCS) does not verify", () => {
    const v = file.vectors[0]!
    const kp = nacl.sign.keyPair.fromSeed(new Uint8Array(Buffer.from(v.seed, "base64")))
    const wrong = Buffer.from(nacl.sign.detached(Buffer.from(JSON.stringify(v.payload), "utf8"), kp.secretKey)).toString("base64")
    expect(envelopeSignatureValid({ payload: v.payload as never, key: v.key, sig: wrong })).toBe(false)
  })

  it("passkey vectors are what the kernel's code computes today", () => {
    expect(file.passkey_vectors).toEqual(JSON.parse(JSON.stringify(passkeyVectors())))
  })

  it.each(file.passkey_vectors.map((v) => [v.name, v] as const))("%s: challenge, authenticatorData, signed bytes and signature check out by a second route", (_name, v) => {
    const sha = (b: string | Buffer) => createHash("sha256").update(b).digest()
    expect(canonicalizeLib(v.payload)).toBe(v.jcs)
    expect(sha(v.jcs).toString("base64url")).toBe(v.challenge)
    expect(passkeyChallenge(v.payload)).toBe(v.challenge)
    expect(JSON.parse(v.client_data_json_text)).toEqual({ type: "webauthn.get", challenge: v.challenge, origin: v.origin, crossOrigin: false })
    const auth = Buffer.from(v.authenticator_data_hex, "hex")
    expect(auth.subarray(0, 32).equals(sha(v.rp_id))).toBe(true)
    expect(auth[32]! & 0x05).toBe(0x05)
    expect(auth.readUInt32BE(33)).toBe(v.counter)
    expect(Buffer.concat([auth, sha(v.client_data_json_text)]).toString("hex")).toBe(v.signed_data_hex)
    // The private key's public half verifies the signature without the kernel's COSE decoding.
    const pub = createPublicKey(createPrivateKey({ key: Buffer.from(v.private_key_pkcs8, "base64"), format: "der", type: "pkcs8" }))
    const signed = Buffer.from(v.signed_data_hex, "hex")
    const sig = Buffer.from(v.sig, "base64")
    expect(v.alg === -7 ? verify("sha256", signed, { key: pub, dsaEncoding: "der" }, sig) : verify(null, signed, pub, sig)).toBe(true)
    expect(verifyPasskeyAssertion(v.envelope as unknown as Envelope)).toMatchObject({ ok: true, assertion: { counter: v.counter, origin: v.origin } })
    // The same assertion over a payload of another generation does not verify.
    expect(verifyPasskeyAssertion({ ...(v.envelope as unknown as Envelope), payload: { ...v.payload, generation: 2 } as never }).ok).toBe(false)
  })
})
