import { canonicalize } from "./Canonical.js"
import type { CommitKey } from "./Commit.js"
import { ed25519Sign, ed25519Verify } from "./Ed25519.js"

/**
 * A delivery as the kernel signs it: the message an agent receives, plus where it stands in its
 * call's signed chain of commits (`prev_seq`: the sequence of the call's last commit it was made
 * from; `prev`: that commit's sha256, as a commit's own `prev` names its predecessor, or "" when
 * the delivering process did not hold it) and the
 * kernel's `key` and `sig` (ed25519 over the JCS of the message without `sig`). A delivery
 * written into `WK_SESSIONS` by anyone without the kernel's key, or changed after signing, does
 * not verify; one made from a history other than the stored one names a commit that is not there.
 */
export interface DeliveryChain {
  readonly prev_seq: number
  readonly prev: string
  readonly key: string
  readonly sig: string
}

const signingBytes = (body: Record<string, unknown>): Uint8Array => {
  const { sig: _, ...rest } = body
  return Buffer.from(canonicalize(rest))
}

/** The delivery chained to the commit at `prevSeq` (digest `prev`) and signed with the kernel's key. */
export const signDelivery = <B extends Record<string, unknown>>(body: B, prevSeq: number, prev: string, key: CommitKey): B & DeliveryChain => {
  const unsigned = { ...body, prev_seq: prevSeq, prev, key: key.publicKey }
  return { ...unsigned, sig: Buffer.from(ed25519Sign(signingBytes(unsigned), key.secretKey)).toString("base64") }
}

/** A delivery's chain fields when it carries them (signature not yet checked), else undefined. */
export const deliveryChainOf = (body: Record<string, unknown>): DeliveryChain | undefined => {
  const { prev_seq, prev, key, sig } = body
  return typeof prev_seq === "number" && typeof prev === "string" && typeof key === "string" && typeof sig === "string" ? { prev_seq, prev, key, sig } : undefined
}

/** Whether a delivery's `sig` verifies under its `key` over the rest of the message. */
export const deliverySignatureValid = (body: Record<string, unknown>, chain: DeliveryChain): boolean =>
  ed25519Verify(signingBytes(body), Buffer.from(chain.sig, "base64"), Buffer.from(chain.key, "base64"))
