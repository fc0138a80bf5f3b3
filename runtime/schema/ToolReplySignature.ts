import nacl from "tweetnacl"
import { canonicalize } from "./Canonical.js"
import { ed25519Sign, ed25519Verify } from "./Ed25519.js"

/**
 * A tool service's signature on its reply (docs/protocol.md, "Tool services"). NATS tells the
 * kernel nothing of who published a reply, and every connection of a tool's NATS user may answer
 * its requests; the signature by the key registered for the tool is what makes a reply the
 * service's. It covers the operation, the tool, the idempotency key and the answer, so a reply
 * signed for one call or one tool answers no other.
 */
export interface ToolReplySigner {
  /** The service's principal, registered in the policy with class `tool:<tool>` for each tool it serves. */
  readonly principal: string
  /** Its ed25519 secret key (64 bytes). */
  readonly secretKey: Uint8Array
}

/** The fields a signed reply adds to the protocol's answer. */
export interface ToolReplySignatureFields {
  readonly service: string
  readonly key: string
  readonly sig: string
}

/** The class that registers a principal as the service identity of `tool`. */
export const toolServiceClass = (tool: string): string => `tool:${tool}`

const encoder = new TextEncoder()

const signedBytes = (op: "invoke" | "readback", tool: string, idempotencyKey: string, service: string, answer: Record<string, unknown>) =>
  encoder.encode(canonicalize({ op: `tool.${op}`, tool, idempotency_key: idempotencyKey, service, answer }))

/** `answer` with the service's signature fields. */
export const signToolReply = <A extends Record<string, unknown>>(op: "invoke" | "readback", tool: string, idempotencyKey: string, answer: A, signer: ToolReplySigner): A & ToolReplySignatureFields => ({
  ...answer,
  service: signer.principal,
  key: Buffer.from(nacl.sign.keyPair.fromSecretKey(signer.secretKey).publicKey).toString("base64"),
  sig: Buffer.from(ed25519Sign(signedBytes(op, tool, idempotencyKey, signer.principal, answer), signer.secretKey)).toString("base64")
})

/**
 * Whether `body` (a reply as received) is signed by one of `keys` for this operation, tool and
 * idempotency key. Never throws.
 */
export const toolReplySigned = (op: "invoke" | "readback", tool: string, idempotencyKey: string, body: unknown, keys: ReadonlyArray<string>): boolean => {
  if (body === null || typeof body !== "object" || Array.isArray(body)) return false
  const { service, key, sig, ...answer } = body as Record<string, unknown>
  if (typeof service !== "string" || typeof key !== "string" || typeof sig !== "string" || !keys.includes(key)) return false
  try {
    return ed25519Verify(signedBytes(op, tool, idempotencyKey, service, answer), Buffer.from(sig, "base64"), Buffer.from(key, "base64"))
  } catch {
    return false
  }
}
