import { createHash, createPrivateKey, sign } from "node:crypto"
import nacl from "tweetnacl"
import { callDigest, canonicalize, heldIdOf, jcsDigest } from "../../runtime/schema/Canonical.js"
import { signEnvelope } from "../../runtime/schema/EnvelopeSignature.js"
import { passkeyChallenge } from "../../runtime/schema/PasskeyAssertion.js"
import { authenticatorData, coseOf } from "../support/SoftPasskey.js"

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

/**
 * A passkey's attestation (docs/protocol.md, "Passkey attestations"): everything another
 * language needs to check one, the private key included so it can make its own. `sig` is over
 * `signed_data_hex` (authenticatorData || sha256(clientDataJSON)).
 */
export interface PasskeyVector {
  readonly name: string
  readonly alg: -7 | -8
  /** The credential's private key, PKCS#8 DER, base64 (test material only). */
  readonly private_key_pkcs8: string
  /** The COSE_Key of the public key, standard base64: the envelope's `key` and the registry's `public_key`. */
  readonly public_key: string
  readonly credential_id: string
  readonly rp_id: string
  readonly origin: string
  readonly payload: Record<string, unknown>
  readonly jcs: string
  /** base64url (no padding) of sha256 over the JCS bytes: clientDataJSON's `challenge`. */
  readonly challenge: string
  readonly client_data_json_text: string
  /** authenticatorData, hex: sha256(rp_id), flags (0x05: UP and UV), the counter (4 bytes, big-endian). */
  readonly authenticator_data_hex: string
  readonly counter: number
  readonly signed_data_hex: string
  /** The signature, standard base64: the envelope's `sig` (ES256: ASN.1 DER ECDSA; Ed25519: 64 bytes). */
  readonly sig: string
  /** The envelope as sent on `wk.v1.held.attest` and recorded in `attestation.accepted`. */
  readonly envelope: Record<string, unknown>
}

// ECDSA signatures are randomized: the ES256 vector's signature was made once by this code and is
// kept; the test checks it verifies. Ed25519 signatures are deterministic and are made each time.
const Es256Signature = "MEUCIQCWpuO9xGeRvPUDlGWP5ycpqUTwjX86w8NAu95fXPnUzgIgODHr7ScdxmFAjW3PNRnRUyca9tA/KNDmJrBqXiuUYfE="

const Pkcs8Prefix = { [-7]: "3041020100301306072a8648ce3d020106082a8648ce3d030107042730250201010420", [-8]: "302e020100300506032b657004220420" } as const

const passkeyVector = (name: string, alg: -7 | -8, payload: Record<string, unknown>, es256Sig?: string): PasskeyVector => {
  const seed = seedOf(name)
  const der = Buffer.concat([Buffer.from(Pkcs8Prefix[alg], "hex"), seed])
  const privateKey = createPrivateKey({ key: der, format: "der", type: "pkcs8" })
  const public_key = coseOf(privateKey.export({ format: "jwk" }) as { x?: string; y?: string }, alg)
  const origin = "http://localhost:8080"
  const rp_id = "localhost"
  const counter = 7
  const jcs = canonicalize(payload)
  const challenge = passkeyChallenge(payload)
  const client_data_json_text = JSON.stringify({ type: "webauthn.get", challenge, origin, crossOrigin: false })
  const authData = authenticatorData(rp_id, true, counter)
  const signed = Buffer.concat([authData, createHash("sha256").update(client_data_json_text).digest()])
  const sig = alg === -8 ? sign(null, signed, privateKey).toString("base64") : (es256Sig ?? sign("sha256", signed, { key: privateKey, dsaEncoding: "der" }).toString("base64"))
  const credential_id = createHash("sha256").update(public_key).digest().subarray(0, 16).toString("base64url")
  return {
    name,
    alg,
    private_key_pkcs8: der.toString("base64"),
    public_key,
    credential_id,
    rp_id,
    origin,
    payload,
    jcs,
    challenge,
    client_data_json_text,
    authenticator_data_hex: authData.toString("hex"),
    counter,
    signed_data_hex: signed.toString("hex"),
    sig,
    envelope: { payload, key: public_key, sig, webauthn: { credential_id, authenticator_data: authData.toString("base64url"), client_data_json: Buffer.from(client_data_json_text).toString("base64url") } }
  }
}

const passkeyAttestation = {
  op: "attest",
  principal: "user:carol",
  held_id: "h_0123456789abcdef0123456789abcdef",
  generation: 1,
  call_digest: "5f1c1bb0c2b5b2b1f0f3c1d9a4b6e8a2c3d4e5f60718293a4b5c6d7e8f901234",
  contract_digest: "0a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5061728394a5b6c7d8e9f",
  presentation_digest: "9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0",
  class: "human",
  decision: "approve",
  nonce: "n-0003",
  issued_at: "2026-01-01T00:00:00.000Z",
  expires_at: "2026-01-01T00:10:00.000Z"
}

/** Every passkey vector, in a fixed order (`es256Sig` null: a fresh ES256 signature). */
export const passkeyVectors = (es256Sig: string | null = Es256Signature): ReadonlyArray<PasskeyVector> => [
  passkeyVector("a passkey attestation (ES256)", -7, passkeyAttestation, es256Sig ?? undefined),
  passkeyVector("a passkey attestation (Ed25519)", -8, { ...passkeyAttestation, nonce: "n-0004" })
]
