import { createHash } from "node:crypto"
import canonicalizeJson from "canonicalize"

/** RFC 8785 (JCS) canonical JSON text of a value. */
export const canonicalize = (value: unknown): string => {
  const text = canonicalizeJson(value)
  if (text === undefined) throw new TypeError("value has no canonical JSON form")
  return text
}

/** Lowercase hex sha256 of bytes or a string. */
export const sha256Hex = (data: string | Uint8Array): string => createHash("sha256").update(data).digest("hex")

/** sha256 of the JCS form of a value. */
export const jcsDigest = (value: unknown): string => sha256Hex(canonicalize(value))

/** `call_digest = sha256(JCS({tool, args}))` of the canonical (post-transform) proposal. */
export const callDigest = (tool: string, args: unknown): string => jcsDigest({ tool, args })

/** `contract_digest = sha256(JCS(witness_contract))`. */
export const contractDigest = (contract: unknown): string => jcsDigest(contract)

/** `presentation_digest = sha256(JCS(presentation))`: what a witness was shown, as it binds it. */
export const presentationDigest = (presentation: unknown): string => jcsDigest(presentation)

/** The stable held id of one agent call: the same four names always give the same id. */
export const heldIdOf = (principal: string, sessionId: string, turnId: string, callId: string): string =>
  "h_" + jcsDigest([principal, sessionId, turnId, callId]).slice(0, 32)
