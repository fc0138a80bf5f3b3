import { createHmac, hash } from "node:crypto"
import { jcs } from "./internal/jcs.mjs"

/**
 * RFC 8785 (JCS) canonical JSON text of a value: the one canonicalizer of kernel and auditor
 * (`internal/jcs.mjs`, held byte for byte and error for error to the `canonicalize` package by
 * test/schema/Jcs.test.ts).
 */
export const canonicalize = (value: unknown): string => jcs(value)

/** Lowercase hex sha256 of bytes or a string (one-shot: no Hash object per digest). */
export const sha256Hex = (data: string | Uint8Array): string => hash("sha256", data, "hex")

/** sha256 of the JCS form of a value. */
export const jcsDigest = (value: unknown): string => sha256Hex(canonicalize(value))

/** `call_digest = sha256(JCS({tool, args}))` of the canonical (post-transform) proposal. */
export const callDigest = (tool: string, args: unknown): string => jcsDigest({ tool, args })

/** `contract_digest = sha256(JCS(witness_contract))`. */
export const contractDigest = (contract: unknown): string => jcsDigest(contract)

/** `presentation_digest = sha256(JCS(presentation))`: what a witness was shown, as it binds it. */
export const presentationDigest = (presentation: unknown): string => jcsDigest(presentation)

/**
 * The stable held id of one agent call: the same four names and salt always give the same id.
 * The kernel salts with `heldIdSaltOf` under its secret, so ids cannot be guessed from the names;
 * the salt is recorded in `call.proposed`, so an auditor can still check the derivation.
 */
export const heldIdOf = (principal: string, sessionId: string, turnId: string, callId: string, salt?: string): string =>
  "h_" + jcsDigest(salt === undefined ? [principal, sessionId, turnId, callId] : [principal, sessionId, turnId, callId, salt]).slice(0, 32)

/** The salt of a call's held id: HMAC-SHA256 under the kernel's secret of JCS([principal, session, turn, call]), hex. */
export const heldIdSaltOf = (secret: Uint8Array, principal: string, sessionId: string, turnId: string, callId: string): string =>
  createHmac("sha256", secret).update(canonicalize([principal, sessionId, turnId, callId])).digest("hex")
