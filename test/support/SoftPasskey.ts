import { createHash, createPrivateKey, generateKeyPairSync, sign, type KeyObject } from "node:crypto"
import { isoCBOR } from "@simplewebauthn/server/helpers"
import type { Envelope } from "../../runtime/schema/Envelope.js"
import type { PasskeyEntry } from "../../runtime/schema/Passkey.js"
import { passkeyChallenge } from "../../runtime/schema/PasskeyAssertion.js"

/**
 * A software authenticator for tests: a P-256 (ES256) or Ed25519 credential that makes WebAuthn
 * assertions the way a browser and its authenticator do (authenticatorData, clientDataJSON,
 * a signature over both), with every part under the test's control: origin, rp id, flags,
 * counter, and the challenge (by default the digest of the payload it signs).
 */
export interface SoftPasskey {
  readonly entry: PasskeyEntry
  readonly privateKey: KeyObject
  counter: number
  /** Signs `payload` into a passkey envelope; `over` overrides what the authenticator and browser would say. */
  readonly sign: (payload: Record<string, unknown>, over?: AssertionOverrides) => Envelope
}

export interface AssertionOverrides {
  readonly origin?: string
  readonly rpId?: string
  readonly challenge?: string
  readonly uv?: boolean
  readonly counter?: number
  readonly type?: string
}

const sha256 = (b: Uint8Array | string) => createHash("sha256").update(b).digest()

/** The COSE_Key of a public key as JWK (EC2 P-256 with ES256, or OKP Ed25519 with EdDSA), standard base64. */
export const coseOf = (jwk: { x?: string; y?: string }, alg: -7 | -8): string => {
  const m = new Map<number, number | Uint8Array>()
  if (alg === -7) {
    m.set(1, 2).set(3, -7).set(-1, 1).set(-2, new Uint8Array(Buffer.from(jwk.x!, "base64url"))).set(-3, new Uint8Array(Buffer.from(jwk.y!, "base64url")))
  } else {
    m.set(1, 1).set(3, -8).set(-1, 6).set(-2, new Uint8Array(Buffer.from(jwk.x!, "base64url")))
  }
  return Buffer.from(isoCBOR.encode(m)).toString("base64")
}

/** authenticatorData: rpIdHash, flags (UP always, UV unless told), the counter big-endian. */
export const authenticatorData = (rpId: string, uv: boolean, counter: number): Buffer => {
  const out = Buffer.alloc(37)
  sha256(rpId).copy(out, 0)
  out[32] = 0x01 | (uv ? 0x04 : 0)
  out.writeUInt32BE(counter, 33)
  return out
}

/** A credential bound to `origin` (rp id: its host), from a fresh key or from `privateKey` (PKCS#8 DER, base64). */
export const softPasskey = (opts: { origin?: string; alg?: -7 | -8; id?: string; privateKey?: string; counter?: number } = {}): SoftPasskey => {
  const origin = opts.origin ?? "http://localhost:8080"
  const alg = opts.alg ?? -7
  const privateKey =
    opts.privateKey !== undefined
      ? createPrivateKey({ key: Buffer.from(opts.privateKey, "base64"), format: "der", type: "pkcs8" })
      : alg === -7
        ? generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey
        : generateKeyPairSync("ed25519").privateKey
  const jwk = privateKey.export({ format: "jwk" }) as { x?: string; y?: string }
  const entry: PasskeyEntry = {
    id: opts.id ?? sha256(coseOf(jwk, alg)).subarray(0, 16).toString("base64url"),
    public_key: coseOf(jwk, alg),
    alg,
    rp_id: new URL(origin).hostname,
    origin
  }
  const self: SoftPasskey = {
    entry,
    privateKey,
    counter: opts.counter ?? 0,
    sign: (payload, over = {}) => {
      const counter = over.counter ?? ++self.counter
      const authData = authenticatorData(over.rpId ?? entry.rp_id, over.uv ?? true, counter)
      const clientData = Buffer.from(JSON.stringify({ type: over.type ?? "webauthn.get", challenge: over.challenge ?? passkeyChallenge(payload), origin: over.origin ?? origin, crossOrigin: false }))
      const signed = Buffer.concat([authData, sha256(clientData)])
      const sig = alg === -7 ? sign("sha256", signed, { key: privateKey, dsaEncoding: "der" }) : sign(null, signed, privateKey)
      return {
        payload: payload as Envelope["payload"],
        key: entry.public_key,
        sig: sig.toString("base64"),
        webauthn: { credential_id: entry.id, authenticator_data: authData.toString("base64url"), client_data_json: clientData.toString("base64url") }
      }
    }
  }
  return self
}
