import { createHash, createPublicKey, verify, type KeyObject } from "node:crypto"
import { cose, decodeClientDataJSON, decodeCredentialPublicKey, parseAuthenticatorData } from "@simplewebauthn/server/helpers"
import { canonicalize } from "./Canonical.js"
import type { Envelope } from "./Envelope.js"
import type { PasskeyEntry } from "./Passkey.js"

/**
 * A passkey's signed request, checked without any registry: the WebAuthn assertion an envelope
 * carries (`webauthn`) must be a `webauthn.get` whose challenge is `passkeyChallenge(payload)`,
 * with user presence and user verification set, signed by the COSE key in `key` over
 * `authenticatorData || sha256(clientDataJSON)`. What the registry decides (the origin and rpId
 * the credential is bound to, its id, the signature counter) is `passkeyBoundTo` and the kernel's
 * counter store. The kernel, the gateway and the auditor share this one check.
 *
 * CBOR and COSE are decoded by `@simplewebauthn/server`'s helpers; the signature is verified with
 * node:crypto, synchronously, because the auditor's checks and the kernel's authentication are
 * synchronous (the library's own `verifyAuthenticationResponse` is async; tests check both agree).
 */

/** A verified assertion: what the registry and the counter store still judge. */
export interface PasskeyAssertion {
  readonly credentialId: string
  readonly origin: string
  /** sha256 of the rp id the authenticator signed for, hex. */
  readonly rpIdHash: string
  readonly counter: number
  /** sha256 of the signature bytes, hex: names this one assertion (a replay has the same). */
  readonly assertionDigest: string
}

export type PasskeyVerdict = { readonly ok: true; readonly assertion: PasskeyAssertion } | { readonly ok: false; readonly reason: string }

const fromB64Url = (s: string): Buffer => Buffer.from(s, "base64url")
const sha256 = (b: Uint8Array | string): Buffer => createHash("sha256").update(b).digest()

/** The WebAuthn challenge for a payload: base64url (no padding) of sha256 over its JCS bytes. */
export const passkeyChallenge = (payload: unknown): string => sha256(canonicalize(payload)).toString("base64url")

/** sha256 of an rp id, hex: what authenticatorData's first 32 bytes must be. */
export const rpIdHashOf = (rpId: string): string => sha256(rpId).toString("hex")

const keys = new Map<string, { readonly key: KeyObject; readonly alg: number } | string>()

/** The node:crypto key and COSE algorithm of a COSE_Key (standard base64), or why it is not one this kernel takes. */
export const coseKey = (b64: string): { readonly key: KeyObject; readonly alg: number } | string => {
  const hit = keys.get(b64)
  if (hit !== undefined) return hit
  let out: { readonly key: KeyObject; readonly alg: number } | string
  try {
    const k = decodeCredentialPublicKey(new Uint8Array(Buffer.from(b64, "base64")))
    const alg = k.get(cose.COSEKEYS.alg)
    if (cose.isCOSEPublicKeyEC2(k) && alg === cose.COSEALG.ES256 && k.get(cose.COSEKEYS.crv) === cose.COSECRV.P256) {
      const x = k.get(cose.COSEKEYS.x), y = k.get(cose.COSEKEYS.y)
      out = x && y ? { key: createPublicKey({ key: { kty: "EC", crv: "P-256", x: Buffer.from(x).toString("base64url"), y: Buffer.from(y).toString("base64url") }, format: "jwk" }), alg } : "the COSE key has no x or y"
    } else if (cose.isCOSEPublicKeyOKP(k) && alg === cose.COSEALG.EdDSA && k.get(cose.COSEKEYS.crv) === cose.COSECRV.ED25519) {
      const x = k.get(cose.COSEKEYS.x)
      out = x ? { key: createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: Buffer.from(x).toString("base64url") }, format: "jwk" }), alg } : "the COSE key has no x"
    } else out = `COSE algorithm ${String(alg)} is not taken (ES256 -7 on P-256, or EdDSA -8 on Ed25519)`
  } catch (e) {
    out = `the key is not a COSE public key: ${e instanceof Error ? e.message : String(e)}`
  }
  if (keys.size > 4096) keys.clear()
  keys.set(b64, out)
  return out
}

/** The registry-free check of a passkey envelope (see above). */
export const verifyPasskeyAssertion = (env: Envelope): PasskeyVerdict => {
  const w = env.webauthn
  if (w === undefined) return { ok: false, reason: "the envelope carries no webauthn assertion" }
  try {
    const client = decodeClientDataJSON(w.client_data_json)
    if (client.type !== "webauthn.get") return { ok: false, reason: `clientDataJSON.type is ${JSON.stringify(client.type)}, not "webauthn.get"` }
    if (client.challenge !== passkeyChallenge(env.payload)) return { ok: false, reason: "the assertion's challenge is not the digest of this payload" }
    if (typeof client.origin !== "string") return { ok: false, reason: "clientDataJSON names no origin" }
    const authData = fromB64Url(w.authenticator_data)
    const parsed = parseAuthenticatorData(new Uint8Array(authData))
    if (!parsed.flags.up) return { ok: false, reason: "the authenticator did not confirm user presence (UP flag)" }
    if (!parsed.flags.uv) return { ok: false, reason: "the authenticator did not verify the user (UV flag): user verification is required" }
    const k = coseKey(env.key)
    if (typeof k === "string") return { ok: false, reason: k }
    const signed = Buffer.concat([authData, sha256(fromB64Url(w.client_data_json))])
    const sig = Buffer.from(env.sig, "base64")
    const valid = k.alg === cose.COSEALG.ES256 ? verify("sha256", signed, { key: k.key, dsaEncoding: "der" }, sig) : verify(null, signed, k.key, sig)
    if (!valid) return { ok: false, reason: "the passkey signature does not verify over authenticatorData and the clientDataJSON hash" }
    return {
      ok: true,
      assertion: { credentialId: w.credential_id, origin: client.origin, rpIdHash: Buffer.from(parsed.rpIdHash).toString("hex"), counter: parsed.counter, assertionDigest: sha256(sig).toString("hex") }
    }
  } catch (e) {
    return { ok: false, reason: `the webauthn assertion does not decode: ${e instanceof Error ? e.message : String(e)}` }
  }
}

/**
 * Whether a verified assertion is one the registered passkey may make: the same credential id and
 * public key, signed for its rp id, on its origin. Null when it may, else why not.
 */
export const passkeyBoundTo = (a: PasskeyAssertion, key: string, entry: PasskeyEntry): string | null => {
  if (a.credentialId !== entry.id || key !== entry.public_key) return "the credential is not the registered passkey"
  if (a.origin !== entry.origin) return `the assertion was made on origin ${JSON.stringify(a.origin)}; the passkey is registered for ${JSON.stringify(entry.origin)}`
  if (a.rpIdHash !== rpIdHashOf(entry.rp_id)) return `the assertion was made for another relying party than '${entry.rp_id}'`
  return null
}

/** The registered passkey of a principal's that an envelope names (by credential id and key), if any. */
export const registeredPasskey = (passkeys: ReadonlyArray<PasskeyEntry> | undefined, env: Envelope): PasskeyEntry | undefined =>
  env.webauthn === undefined ? undefined : passkeys?.find((p) => p.id === env.webauthn!.credential_id && p.public_key === env.key)

/**
 * Whether a signature counter may follow the last one seen for the credential (WebAuthn §6.1.1):
 * an authenticator that counts must count up; one that always says 0 has no counter. A counter
 * at or below the last seen is a cloned authenticator or a replayed assertion.
 */
export const counterAdvances = (last: number | undefined, next: number): boolean => last === undefined || (last === 0 && next === 0) || next > last

/** Whether a passkey envelope is made by one of `passkeys` as registered: its credential, its origin, its rp id (the auditor's registry check). */
export const passkeyRegistered = (passkeys: ReadonlyArray<PasskeyEntry> | undefined, env: Envelope): boolean => {
  const entry = registeredPasskey(passkeys, env)
  if (entry === undefined) return false
  const v = verifyPasskeyAssertion(env)
  return v.ok && passkeyBoundTo(v.assertion, env.key, entry) === null
}
