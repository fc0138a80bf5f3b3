import { Either, Schema } from "effect"
import { readFileSync, writeFileSync } from "node:fs"
import nacl from "tweetnacl"
import { canonicalize } from "../schema/Canonical.js"
import { ed25519Sign, ed25519Verify } from "../schema/Ed25519.js"
import { LedgerError } from "../schema/LedgerError.js"

const Base64 = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9+/]+={0,2}$/))

/**
 * The kernel's own ed25519 signing key, as a file only the kernel's operator reads (mode 0600).
 * Its public key goes into auditors' trust roots (`kernel_keys`); what it signs verifies
 * offline against that root. A new key is a rotation: the old public key stays in the root for
 * what it signed.
 */
export const KernelKeyFile = Schema.Struct({
  format: Schema.Literal("wk.kernel-key/1"),
  public_key: Base64,
  secret_key: Base64
})
export type KernelKeyFile = typeof KernelKeyFile.Type

/** A kernel's signing key pair. */
export interface KernelKey {
  readonly publicKey: string
  readonly secretKey: Uint8Array
}

/** A new key pair, written to `path` (mode 0600); returns its public key. */
export const generateKernelKey = (path: string): string => {
  const kp = nacl.sign.keyPair()
  const file: KernelKeyFile = { format: "wk.kernel-key/1", public_key: Buffer.from(kp.publicKey).toString("base64"), secret_key: Buffer.from(kp.secretKey).toString("base64") }
  writeFileSync(path, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600, flag: "wx" })
  return file.public_key
}

/** Reads a kernel key file; the error names the file and what is wrong. */
export const readKernelKey = (path: string): Either.Either<KernelKey, LedgerError> => {
  try {
    const file = Schema.decodeUnknownSync(KernelKeyFile)(JSON.parse(readFileSync(path, "utf8")))
    const secretKey = new Uint8Array(Buffer.from(file.secret_key, "base64"))
    if (secretKey.length !== 64 || Buffer.from(nacl.sign.keyPair.fromSecretKey(secretKey).publicKey).toString("base64") !== file.public_key) {
      return Either.left(new LedgerError({ operation: `read kernel key ${path}`, message: `read kernel key ${path}: public_key is not the secret key's` }))
    }
    return Either.right({ publicKey: file.public_key, secretKey })
  } catch (e) {
    return Either.left(new LedgerError({ operation: `read kernel key ${path}`, message: `read kernel key ${path}: ${e instanceof Error ? e.message : String(e)}`, cause: e }))
  }
}

/** A document's signature: ed25519 by `key` over the JCS of the document without `signature`. */
export const DocumentSignature = Schema.Struct({ key: Base64, sig: Base64 })
export type DocumentSignature = typeof DocumentSignature.Type

const encoder = new TextEncoder()
const unsigned = (doc: Record<string, unknown>): Uint8Array => {
  const { signature: _, ...rest } = doc
  return encoder.encode(canonicalize(rest))
}

/** Signs a JSON document with the kernel's key. */
export const signDocument = <D extends Record<string, unknown>>(doc: D, key: KernelKey): D & { readonly signature: DocumentSignature } => ({
  ...doc,
  signature: { key: key.publicKey, sig: Buffer.from(ed25519Sign(unsigned(doc), key.secretKey)).toString("base64") }
})

/** Whether a document's signature verifies (over the document as given, unknown fields included). */
export const documentSignatureValid = (doc: Record<string, unknown>, signature: DocumentSignature): boolean => {
  try {
    return ed25519Verify(unsigned(doc), Buffer.from(signature.sig, "base64"), Buffer.from(signature.key, "base64"))
  } catch {
    return false
  }
}
