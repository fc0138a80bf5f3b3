import { Either, Schema } from "effect"
import nacl from "tweetnacl"
import { canonicalize } from "../schema/Canonical.js"
import { PublicKey, type PluginManifest, type SignedManifest } from "../schema/PluginManifest.js"

/** An ed25519 key file as written by `wk keygen`. */
export const KeyFile = Schema.Struct({
  type: Schema.Literal("ed25519"),
  public_key: PublicKey,
  secret_key: Schema.String
})
export type KeyFile = typeof KeyFile.Type

const b64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString("base64")
const unb64 = (text: string): Uint8Array => new Uint8Array(Buffer.from(text, "base64"))

/** The exact bytes a signature covers: UTF-8 of the RFC 8785 form of the manifest. */
export const signedBytes = (manifest: PluginManifest): Uint8Array => new TextEncoder().encode(canonicalize(manifest))

/** A fresh ed25519 key pair. */
export const generateKey = (): KeyFile => {
  const kp = nacl.sign.keyPair()
  return { type: "ed25519", public_key: b64(kp.publicKey), secret_key: b64(kp.secretKey) }
}

/** Signs a manifest (ed25519 is deterministic, so the same key and manifest give the same file). */
export const signManifest = (manifest: PluginManifest, key: KeyFile): SignedManifest => ({
  manifest,
  signer: key.public_key,
  signature: b64(nacl.sign.detached(signedBytes(manifest), unb64(key.secret_key)))
})

/** Why a signed manifest is not acceptable for a pinned signer key. */
export type SignatureProblem = "unsigned" | "unknown_signer" | "bad_signature"

/** Checks the signature and that it was made by `expectedSigner` (the key the profile pins). */
export const verifySignature = (signed: SignedManifest, expectedSigner: string): Either.Either<void, { problem: SignatureProblem; detail: string }> => {
  if (signed.signature === undefined || signed.signer === undefined) return Either.left({ problem: "unsigned", detail: "the manifest carries no signature" })
  if (signed.signer !== expectedSigner) return Either.left({ problem: "unknown_signer", detail: `signed by ${signed.signer}, but the profile pins signer ${expectedSigner}` })
  const sig = unb64(signed.signature)
  const key = unb64(expectedSigner)
  if (sig.length !== nacl.sign.signatureLength || key.length !== nacl.sign.publicKeyLength) return Either.left({ problem: "bad_signature", detail: "signature or key has the wrong length" })
  return nacl.sign.detached.verify(signedBytes(signed.manifest), sig, key)
    ? Either.right(undefined)
    : Either.left({ problem: "bad_signature", detail: "the ed25519 signature does not verify over the JCS of the manifest" })
}
