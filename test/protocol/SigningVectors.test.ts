import { describe, expect, it } from "vitest"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import nacl from "tweetnacl"
import canonicalizeLib from "canonicalize"
import { envelopeSignatureValid } from "../../runtime/schema/EnvelopeSignature.js"
import { signingVectors, type SigningVector } from "./signingVectors.js"

// docs/signing-vectors.json is what a client in another language checks itself against. These
// tests keep it equal to what the kernel's own code computes, and check each vector by a second
// route (tweetnacl, the `canonicalize` package), so the file can neither drift nor be wrong.
const file = JSON.parse(readFileSync(join(import.meta.dirname, "..", "..", "docs", "signing-vectors.json"), "utf8")) as { format: string; vectors: Array<SigningVector> }

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
})
