import { describe, expect, it } from "vitest"
import fc from "fast-check"
import nacl from "tweetnacl"
import { ed25519Sign, ed25519Verify } from "../../runtime/schema/Ed25519.js"
import { verifySignature } from "../../runtime/protocol/Authenticate.js"
import { envelopeSignatureValid, signEnvelope } from "../../runtime/schema/EnvelopeSignature.js"
import type { Envelope } from "../../runtime/schema/Envelope.js"

// The request path's check (protocol, shared with its worker) and the readers' check (schema:
// client, gateway, auditor) must agree on every envelope.
const verifies = (env: Envelope): boolean => {
  const kernel = verifySignature(env)
  expect(envelopeSignatureValid(env)).toBe(kernel)
  return kernel
}

fc.configureGlobal({ seed: Number(process.env["WK_FC_SEED"] ?? 8785) })

const hex = (s: string) => new Uint8Array(Buffer.from(s, "hex"))
const seedArb = fc.uint8Array({ minLength: 32, maxLength: 32 })
const messageArb = fc.uint8Array({ maxLength: 512 })
const flip = (bytes: Uint8Array, index: number, bit: number): Uint8Array => {
  const out = new Uint8Array(bytes)
  out[index % out.length]! ^= 1 << (bit % 8)
  return out
}

describe("native ed25519 against tweetnacl", () => {
  it("RFC 8032 test 1: the known signature of the empty message", () => {
    const kp = nacl.sign.keyPair.fromSeed(hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"))
    expect(Buffer.from(kp.publicKey).toString("hex")).toBe("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
    const sig = ed25519Sign(new Uint8Array(), kp.secretKey)
    expect(Buffer.from(sig).toString("hex")).toBe(
      "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
    )
    expect(ed25519Verify(new Uint8Array(), sig, kp.publicKey)).toBe(true)
  })

  it("native verify accepts tweetnacl signatures, tweetnacl accepts native ones, and both sign the same bytes", () => {
    fc.assert(
      fc.property(seedArb, messageArb, (seed, message) => {
        const kp = nacl.sign.keyPair.fromSeed(seed)
        const theirs = nacl.sign.detached(message, kp.secretKey)
        const ours = ed25519Sign(message, kp.secretKey)
        expect(ed25519Verify(message, theirs, kp.publicKey)).toBe(true)
        expect(nacl.sign.detached.verify(message, ours, kp.publicKey)).toBe(true)
        expect(Buffer.from(ours).equals(Buffer.from(theirs))).toBe(true) // ed25519 is deterministic
      }),
      // tweetnacl is pure JS (milliseconds per operation): a few dozen random keys suffice here
      { numRuns: 40 }
    )
  })

  it("rejects an altered message, an altered signature and the wrong key, as tweetnacl does", () => {
    fc.assert(
      fc.property(seedArb, seedArb, messageArb.filter((m) => m.length > 0), fc.nat(), fc.nat(), (seed, otherSeed, message, at, bit) => {
        fc.pre(Buffer.compare(Buffer.from(seed), Buffer.from(otherSeed)) !== 0)
        const kp = nacl.sign.keyPair.fromSeed(seed)
        const other = nacl.sign.keyPair.fromSeed(otherSeed)
        const sig = ed25519Sign(message, kp.secretKey)
        const badMessage = flip(message, at, bit)
        const badSig = flip(sig, at, bit)
        expect(ed25519Verify(badMessage, sig, kp.publicKey)).toBe(false)
        expect(nacl.sign.detached.verify(badMessage, sig, kp.publicKey)).toBe(false)
        expect(ed25519Verify(message, sig, other.publicKey)).toBe(false)
        expect(nacl.sign.detached.verify(message, sig, other.publicKey)).toBe(false)
        // a flipped signature bit: native never accepts it (tweetnacl can accept some high-S flips: see below)
        expect(ed25519Verify(message, badSig, kp.publicKey)).toBe(false)
      }),
      { numRuns: 30 }
    )
  })

  it("rejects malleated signatures (S + L), which tweetnacl accepts (it does not check S < L; RFC 8032 requires it)", () => {
    // The group order L, little-endian; adding it to S gives a second encoding of the same scalar.
    const L = 2n ** 252n + 27742317777372353535851937790883648493n
    const kp = nacl.sign.keyPair.fromSeed(new Uint8Array(32).fill(7))
    const message = new TextEncoder().encode("transfer 250")
    const sig = ed25519Sign(message, kp.secretKey)
    const s = BigInt("0x" + Buffer.from(sig.subarray(32)).reverse().toString("hex")) + L
    const sBytes = Buffer.from(s.toString(16).padStart(64, "0"), "hex").reverse()
    const malleated = new Uint8Array([...sig.subarray(0, 32), ...sBytes])
    expect(ed25519Verify(message, malleated, kp.publicKey)).toBe(false)
  })

  it("rejects wrong lengths and garbage keys without throwing", () => {
    const kp = nacl.sign.keyPair.fromSeed(new Uint8Array(32).fill(1))
    const message = new Uint8Array([1, 2, 3])
    const sig = ed25519Sign(message, kp.secretKey)
    expect(ed25519Verify(message, sig.subarray(0, 63), kp.publicKey)).toBe(false)
    expect(ed25519Verify(message, new Uint8Array([...sig, 0]), kp.publicKey)).toBe(false)
    expect(ed25519Verify(message, sig, kp.publicKey.subarray(0, 31))).toBe(false)
    expect(ed25519Verify(message, sig, new Uint8Array(32))).toBe(false)
    expect(ed25519Verify(message, new Uint8Array(64), kp.publicKey)).toBe(false)
  })
})

describe("signed envelopes", () => {
  it("a signEnvelope envelope verifies with tweetnacl over the JCS bytes of its payload, and any change breaks it", () => {
    fc.assert(
      fc.property(seedArb, fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), fc.jsonValue({ maxDepth: 2 })), (seed, extra) => {
        const kp = nacl.sign.keyPair.fromSeed(seed)
        const payload = { ...extra, op: "propose", principal: "agent:alice", amount: 250 }
        const env = signEnvelope(payload, kp.secretKey)
        expect(env.key).toBe(Buffer.from(kp.publicKey).toString("base64"))
        expect(verifies(env)).toBe(true)
        // key order of the payload does not matter: the signature is over JCS
        const reordered = Object.fromEntries(Object.entries(env.payload).reverse())
        expect(verifies({ ...env, payload: reordered as never })).toBe(true)
        expect(verifies({ ...env, payload: { ...env.payload, amount: 251 } })).toBe(false)
        expect(verifies({ ...env, key: Buffer.from(nacl.sign.keyPair().publicKey).toString("base64") })).toBe(false)
        expect(verifies({ ...env, sig: "AAAA" })).toBe(false)
      }),
      { numRuns: 30 }
    )
  })
})
