import type { Commit } from "../../schema/Commit.js"
import { sha256Hex } from "../../schema/Canonical.js"
import type { SequencedEvent } from "../../schema/Events.js"
import { auditCall, type AuditedCall } from "../Audit.js"
import type { Violation } from "../AuditReport.js"
import { commitChain, type ChainFinding, type ChainLink, type CheckContext, type DeliveryMessage } from "../checks/index.js"
import { parseCommit } from "../internal/fastDecode.js"
import type { KernelKeys } from "../KernelKeys.js"
import type { RawMessage } from "../StreamReader.js"

/** What checking one call needs besides its messages. */
export interface CallEnvironment {
  readonly ctx: CheckContext
  readonly kernelKeys: KernelKeys | undefined
  readonly storeSkewMs: number
}

/** Where an event sits, for the policy records' placement (`registry`). */
export interface Placed {
  readonly seq: number
  readonly at: string
  readonly epoch?: number
}

/** One call checked: every per-call finding, ready to be tallied. */
export interface CallOutcome {
  readonly heldId: string
  /** `stream` violations: commits that do not decode or name another call. */
  readonly stream: ReadonlyArray<Violation>
  /** `store-time` violations, and how many commits had a store time to compare. */
  readonly storeTime: ReadonlyArray<Violation>
  readonly storeTimed: number
  readonly chain: ChainFinding
  /** `delivery` violations of the call's signed delivery chain, and what could not be proven. */
  readonly delivery: { readonly violations: ReadonlyArray<Violation>; readonly unsigned: number; readonly unchained: number }
  /** Every event's place and claimed epoch, for the policy records' placement. */
  readonly placed: ReadonlyArray<Placed>
  /** The time of the call's last event (null: none decodes). */
  readonly lastAt: number | null
  /** The re-fold and the pure checks (absent when no event decodes). */
  readonly audited?: AuditedCall
}

/** A call's messages decoded: the events that decode, the commits that do (for the chain), and a stream violation for each that does not. */
interface DecodedLog {
  readonly events: ReadonlyArray<SequencedEvent>
  readonly links: ReadonlyArray<ChainLink>
  readonly violations: ReadonlyArray<Violation>
  readonly storeTime: ReadonlyArray<Violation>
  readonly storeTimed: number
}

/**
 * Stage 4, per call (pure): decodes its commits, compares their store times, walks its commit
 * chain and its deliveries' chain, re-folds it with the kernel's reducer and runs every pure check.
 */
export const checkCall = (heldId: string, messages: ReadonlyArray<RawMessage>, env: CallEnvironment): CallOutcome => {
  const d = decodeLog(heldId, messages, env.storeSkewMs)
  const delivery = { violations: [] as Array<Violation>, unsigned: 0, unchained: 0 }
  const delivered = env.ctx.deliveries?.get(heldId)
  if (delivered !== undefined) deliveryChainOf(heldId, d.links, delivered, env.kernelKeys, delivery)
  const placed: Array<Placed> = new Array(d.events.length)
  for (let i = 0; i < d.events.length; i++) {
    const e = d.events[i]!
    placed[i] = "policy_epoch" in e.event ? { seq: e.seq, at: e.event.at, epoch: e.event.policy_epoch } : { seq: e.seq, at: e.event.at }
  }
  const last = d.events[d.events.length - 1]
  return {
    heldId,
    stream: d.violations,
    storeTime: d.storeTime,
    storeTimed: d.storeTimed,
    chain: commitChain(heldId, d.links, env.kernelKeys),
    delivery,
    placed,
    lastAt: last === undefined ? null : Date.parse(last.event.at),
    ...(last === undefined ? {} : { audited: auditCall({ heldId, events: d.events }, env.ctx) })
  }
}

/**
 * Each message is one commit: its events, addressed (seq, index), join the call's history. A
 * commit that does not decode, a commit or an event naming another held call than the subject's,
 * and an event id repeated inside one commit (the kernel never writes one) are stream violations.
 */
const decodeLog = (heldId: string, messages: ReadonlyArray<RawMessage>, storeSkewMs: number): DecodedLog => {
  const events: Array<SequencedEvent> = []
  const links: Array<ChainLink> = []
  const violations: Array<Violation> = []
  const storeTime: Array<Violation> = []
  let storeTimed = 0
  const fail = (seq: number, message: string) => void violations.push({ check: "stream", held_id: heldId, seqs: [seq], message })
  for (const m of messages) {
    let commit: Commit
    try {
      commit = parseCommit(m.data)
    } catch (e) {
      fail(m.seq, `a commit does not decode: ${String(e).slice(0, 200)}`)
      continue
    }
    links.push({ seq: m.seq, data: m.data, commit })
    if (m.time > 0) {
      storeTimed++
      const at = Date.parse(commit.events[commit.events.length - 1]!.at)
      const off = m.time - at
      if (Number.isFinite(at) && Math.abs(off) > storeSkewMs) {
        storeTime.push({
          check: "store-time",
          held_id: heldId,
          seqs: [m.seq],
          message: off > 0
            ? `seq ${m.seq} was stored ${Math.round(off / 1000)} s after its events' time: the commit was written again later (a rebuilt history), or a clock is off`
            : `seq ${m.seq} was stored ${Math.round(-off / 1000)} s before its events' time: its events' time was changed, or a clock is off`
        })
      }
    }
    if (commit.held_id !== heldId) fail(m.seq, `a commit of ${commit.held_id} is stored on the subject of ${heldId}`)
    const ids = new Map<string, number>()
    for (let index = 0; index < commit.events.length; index++) {
      const event = commit.events[index]!
      if (event.held_id !== heldId) fail(m.seq, `seq ${m.seq} index ${index}: an event of ${event.held_id} is stored on the subject of ${heldId}`)
      const earlier = ids.get(event.event_id)
      if (earlier !== undefined) fail(m.seq, `seq ${m.seq} index ${index}: repeats event ${event.event_id} of index ${earlier} in the same commit`)
      else ids.set(event.event_id, index)
      events.push({ seq: m.seq, index, event })
    }
  }
  return { events, links, violations, storeTime, storeTimed }
}

/**
 * Each delivery of a call in `WK_SESSIONS` against the call's commits: a signature that does not
 * verify, a key the trust root does not list (with `kernel_keys`), or a `prev` that is not the
 * digest of the call's commit at `prev_seq` is a `delivery` violation; unsigned deliveries are a
 * violation with `kernel_keys`, else counted, as are signed ones whose process did not hold `prev`.
 */
const deliveryChainOf = (
  heldId: string,
  links: ReadonlyArray<ChainLink>,
  delivered: ReadonlyArray<DeliveryMessage>,
  kernelKeys: KernelKeys | undefined,
  out: { readonly violations: Array<Violation>; unsigned: number; unchained: number }
): void => {
  const fail = (m: DeliveryMessage, message: string) => void out.violations.push({ check: "delivery", held_id: heldId, seqs: [], message: `delivery ${m.delivery_id} (WK_SESSIONS seq ${m.seq}) ${message}` })
  for (const m of delivered) {
    const c = m.chain
    if (c === undefined) {
      if (kernelKeys !== undefined) fail(m, "is not signed by the kernel: anyone who may write WK_SESSIONS could have written it")
      else out.unsigned++
      continue
    }
    if (!c.valid) fail(m, "carries a signature that does not verify: it was changed after the kernel signed it")
    else if (kernelKeys !== undefined && !kernelKeys.keys.includes(c.key)) fail(m, "is signed by a key the trust root does not list as a kernel key")
    if (c.prev === "") {
      out.unchained++
      continue
    }
    const link = links.find((l) => l.seq === c.prev_seq)
    if (link === undefined) fail(m, `was made from the call's commit at seq ${c.prev_seq}, which its history does not hold`)
    else if (sha256Hex(link.data) !== c.prev) fail(m, `was made from a commit at seq ${c.prev_seq} other than the one stored there`)
  }
}

/** The time of the last event of a call that decodes (null: none does). */
export const lastAtOf = (messages: ReadonlyArray<RawMessage>): number | null => {
  for (let i = messages.length - 1; i >= 0; i--) {
    try {
      return Date.parse(parseCommit(messages[i]!.data).events.at(-1)!.at)
    } catch {
      continue
    }
  }
  return null
}
