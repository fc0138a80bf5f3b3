import { Either } from "effect"
import { decodeKeyRotation, keyRotationValid } from "../schema/KeyRotation.js"
import type { Violation } from "./AuditReport.js"

/**
 * The kernel keys an auditor trusts, each from the stream sequence it signs after: the trust
 * root's from the start, keys handed on by a valid rotation record (`_keys`) from that record on.
 */
export interface KernelKeys {
  /** Whether `key` may sign what is stored at `seq`. */
  readonly trusts: (key: string, seq: number) => boolean
  /** Every key, root and rotated. */
  readonly keys: ReadonlyArray<string>
  /** Rotation records that do not decode, do not verify, or start from a key not trusted when they were stored. */
  readonly violations: ReadonlyArray<Violation>
}

/** Follows the rotation records (in stream order) from the root's kernel keys. */
export const kernelKeysOf = (rootKeys: ReadonlyArray<string>, rotations: ReadonlyArray<{ readonly seq: number; readonly data: Uint8Array }>): KernelKeys => {
  const from = new Map<string, number>(rootKeys.map((k) => [k, 0]))
  const violations: Array<Violation> = []
  const fail = (seq: number, message: string) => void violations.push({ check: "commit-chain", held_id: "_keys", seqs: [seq], message })
  const text = new TextDecoder()
  for (const m of [...rotations].sort((a, b) => a.seq - b.seq)) {
    const r = decodeKeyRotation(text.decode(m.data))
    if (Either.isLeft(r)) {
      fail(m.seq, `seq ${m.seq} is not a key rotation record: ${r.left.message.slice(0, 200)}`)
      continue
    }
    const rot = r.right
    const since = from.get(rot.from)
    if (!keyRotationValid(rot)) fail(m.seq, `the key rotation at seq ${m.seq} does not verify under both its keys`)
    else if (since === undefined || since >= m.seq) fail(m.seq, `the key rotation at seq ${m.seq} starts from a key the trust root does not reach: ${rot.to.slice(0, 12)}… is not trusted`)
    else if (!from.has(rot.to)) from.set(rot.to, m.seq)
  }
  return { trusts: (key, seq) => { const s = from.get(key); return s !== undefined && seq > s }, keys: [...from.keys()], violations }
}
