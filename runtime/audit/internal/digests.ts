import { hash } from "node:crypto"
import { jcs } from "./jcs.mjs"

// The digests of schema/Canonical.ts, computed with the faster `jcs` and one-shot `crypto.hash`
// (no Hash object per digest): the signatures check takes several per signed event. Same
// definitions, same results (test/audit/Digests.test.ts holds them to Canonical.ts).

/** RFC 8785 (JCS) canonical JSON text of a value (as `canonicalize` in Canonical.ts). */
export const canonicalize = (value: unknown): string => jcs(value)

/** sha256 of the JCS form of a value. */
export const jcsDigest = (value: unknown): string => hash("sha256", jcs(value), "hex")

/** `call_digest = sha256(JCS({tool, args}))`. */
export const callDigest = (tool: string, args: unknown): string => jcsDigest({ tool, args })

/** The stable held id of one agent call, with the salt `call.proposed` records (absent: an unsalted id). */
export const heldIdOf = (principal: string, sessionId: string, turnId: string, callId: string, salt?: string): string =>
  "h_" + jcsDigest(salt === undefined ? [principal, sessionId, turnId, callId] : [principal, sessionId, turnId, callId, salt]).slice(0, 32)
