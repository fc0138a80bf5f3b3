import { createHash } from "node:crypto"
import nacl from "tweetnacl"
import { callDigest, canonicalize, heldIdOf, jcsDigest } from "../../runtime/schema/Canonical.js"
import { signEnvelope } from "../../runtime/schema/EnvelopeSignature.js"

/**
 * Signing test vectors for clients in any language (docs/signing-vectors.json), built with the
 * kernel's own code: `npx tsx test/protocol/writeSigningVectors.ts` writes them, and
 * SigningVectors.test.ts checks the file still equals what this builds.
 */
export interface SigningVector {
  readonly name: string
  /** The ed25519 seed (32 bytes, base64): the private key a client signs with. */
  readonly seed: string
  /** The public key (32 bytes, base64): the envelope's `key`. */
  readonly key: string
  readonly payload: Record<string, unknown>
  /** RFC 8785 JCS of `payload`, as a string (its UTF-8 bytes are what is signed). */
  readonly jcs: string
  /** The UTF-8 bytes of `jcs`, hex: to compare byte for byte. */
  readonly jcs_utf8_hex: string
  /** ed25519 signature over the UTF-8 bytes of `jcs` (64 bytes, base64): the envelope's `sig`. */
  readonly sig: string
  /** sha256 hex of the JCS bytes (an attestation's `attestation_digest` is this of its payload). */
  readonly payload_digest: string
  /** For a proposal: sha256(JCS({tool, args})), lowercase hex. */
  readonly call_digest?: string
  /** For a proposal: the held id a kernel without a salt derives, `h_` + the first 32 hex of sha256(JCS([principal, session_id, turn_id, call_id])). */
  readonly held_id_unsalted?: string
}

const seedOf = (label: string): Uint8Array => new Uint8Array(createHash("sha256").update(`wk signing vector: ${label}`).digest())

const vector = (name: string, payload: Record<string, unknown>): SigningVector => {
  const seed = seedOf(name)
  const kp = nacl.sign.keyPair.fromSeed(seed)
  const env = signEnvelope(payload, kp.secretKey)
  const jcs = canonicalize(payload)
  const proposal = payload["op"] === "propose" && typeof payload["tool"] === "string"
  return {
    name,
    seed: Buffer.from(seed).toString("base64"),
    key: env.key,
    payload,
    jcs,
    jcs_utf8_hex: Buffer.from(jcs, "utf8").toString("hex"),
    sig: env.sig,
    payload_digest: jcsDigest(payload),
    ...(proposal
      ? {
          call_digest: callDigest(payload["tool"] as string, payload["args"]),
          held_id_unsalted: heldIdOf(String(payload["principal"]), String(payload["session_id"]), String(payload["turn_id"]), String(payload["call_id"]))
        }
      : {})
  }
}

/** Every vector, in a fixed order. */
export const signingVectors = (): ReadonlyArray<SigningVector> => [
  vector("a proposal", {
    op: "propose",
    principal: "agent:alice",
    session_id: "s-1",
    turn_id: "t-1",
    call_id: "c-1",
    tool: "money_transfer",
    args: { from: "alice", to: "bob", amount: 250 },
    nonce: "n-0001",
    expires_at: "2026-01-01T00:05:00.000Z"
  }),
  vector("an attestation", {
    op: "attest",
    principal: "user:carol",
    held_id: "h_0123456789abcdef0123456789abcdef",
    generation: 1,
    call_digest: "5f1c1bb0c2b5b2b1f0f3c1d9a4b6e8a2c3d4e5f60718293a4b5c6d7e8f901234",
    contract_digest: "0a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5061728394a5b6c7d8e9f",
    class: "human",
    decision: "approve",
    nonce: "n-0002",
    issued_at: "2026-01-01T00:00:00.000Z",
    expires_at: "2026-01-01T01:00:00.000Z"
  }),
  vector("number rules", {
    op: "propose",
    principal: "agent:alice",
    session_id: "s-numbers",
    turn_id: "t-1",
    call_id: "c-1",
    tool: "numbers",
    args: { integer: 1000000, negative: -7, zero: 0, fraction: 0.5, third: 1 / 3, large: 1e21, small: 1e-7, exponent: 123456789012345680000, negative_zero: -0 }
  }),
  vector("key order and strings", {
    op: "propose",
    principal: "agent:alice",
    session_id: "s-strings",
    turn_id: "t-1",
    call_id: "c-1",
    tool: "strings",
    args: { "b": "quote \" backslash \\ newline \n tab \t", "a": "é ü ß 日本", "\u20ac": "euro key", "\ud83d\ude00": "emoji key (sorted by UTF-16 code units)", "A": "\u0000 \u001f \u007f", "nested": { "z": [], "y": {}, "x": [true, false, null] } }
  })
]
