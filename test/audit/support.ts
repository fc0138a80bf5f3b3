// Shared setup for the audit suites: real histories through an in-process kernel, and copies of
// the events stream with modifications (the tampered histories).
import { jetstream, jetstreamManager, DeliverPolicy, StorageType } from "@nats-io/jetstream"
import type { NatsConnection } from "@nats-io/transport-node"
import { Effect } from "effect"
import { replayOver, type ReplayOptions } from "../../runtime/audit/Replay.js"
import type { AuditReport, CheckName } from "../../runtime/audit/AuditReport.js"
import { Streams } from "../../runtime/schema/Subjects.js"
import { Roles } from "../support/TestNats.js"
import { jcsDigest } from "../../runtime/schema/Canonical.js"
import { signEnvelope } from "../../runtime/schema/EnvelopeSignature.js"
import { devPublicKey } from "../../runtime/client/DevKeys.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { startupDigest, type TrustRoot } from "../../runtime/audit/TrustRoot.js"

/**
 * One event of the events stream (or one `_policy` / `_archive` record), with its body parsed.
 * `commit` names the commit an event was stored in: `copyStream` writes consecutive events of
 * one commit back as one commit, and an event without it as a commit of its own.
 */
export interface CopiedMessage {
  subject: string
  body: Record<string, unknown>
  commit?: string
}

const HeldPrefix = "wk.v1.events."
const isRecord = (subject: string) => subject.endsWith("._policy") || subject.endsWith("._archive") || subject.includes("._standing.")

/**
 * Every event of a stream in order, each at its address (seq, index), and every record (index 0),
 * read with kernel credentials: commits are split into their events so that tests edit events.
 */
export const readAll = async (nc: NatsConnection, stream: string = Streams.events): Promise<Array<CopiedMessage & { seq: number; index: number }>> => {
  const jsm = await jetstreamManager(nc)
  const info = await jsm.streams.info(stream)
  const out: Array<CopiedMessage & { seq: number; index: number }> = []
  if (info.state.messages === 0) return out
  const consumer = await jetstream(nc).consumers.get(stream, { deliver_policy: DeliverPolicy.All })
  const messages = await consumer.consume({ max_messages: 1000 })
  for await (const m of messages) {
    const body = m.json<Record<string, unknown>>()
    if (isRecord(m.subject)) out.push({ seq: m.seq, index: 0, subject: m.subject, body })
    else (body["events"] as Array<Record<string, unknown>>).forEach((event, index) => out.push({ seq: m.seq, index, subject: m.subject, body: event, commit: String(body["commit_id"]) }))
    if (m.info.pending === 0 || m.seq >= info.state.last_seq) break
  }
  await messages.close()
  return out
}

let copies = 0

/**
 * Writes `messages` (after `edit`) into a new stream `WK_EVENTS_COPY<n>` on subjects
 * `copy<n>.wk.v1.events.>`: the same history, renumbered from 1, as an attacker with write
 * access to a stream could leave it; consecutive events of one commit go back as one commit.
 * Returns the stream name.
 */
export const copyStream = async (
  nc: NatsConnection,
  messages: ReadonlyArray<CopiedMessage>,
  edit: (ms: Array<CopiedMessage>) => Array<CopiedMessage> = (ms) => ms,
  /** The stored text of each event or record (a forger need not write JSON the way the kernel does). */
  serialize: (m: CopiedMessage) => string = (m) => JSON.stringify(m.body)
): Promise<string> => {
  const n = ++copies
  const name = `WK_EVENTS_COPY${n}`
  const prefix = `copy${n}.`
  const jsm = await jetstreamManager(nc)
  await jsm.streams.add({ name, subjects: [`${prefix}wk.v1.events.>`], storage: StorageType.Memory })
  const js = jetstream(nc)
  const edited = edit(messages.map((x) => ({ subject: x.subject, body: structuredClone(x.body), ...(x.commit !== undefined ? { commit: x.commit } : {}) })))
  for (let i = 0; i < edited.length; ) {
    const m = edited[i]!
    if (isRecord(m.subject)) {
      await js.publish(`${prefix}${m.subject}`, new TextEncoder().encode(serialize(m)))
      i++
      continue
    }
    let j = i + 1
    while (m.commit !== undefined && j < edited.length && edited[j]!.commit === m.commit && edited[j]!.subject === m.subject) j++
    const group = edited.slice(i, j)
    const commitId = m.commit ?? String(m.body["event_id"])
    await js.publish(`${prefix}${m.subject}`, new TextEncoder().encode(`{"commit_id":${JSON.stringify(commitId)},"held_id":${JSON.stringify(m.subject.slice(HeldPrefix.length))},"events":[${group.map(serialize).join(",")}]}`))
    i = j
  }
  return name
}

/** Replays with the given role's credentials. */
export const replayAs = (servers: string, role: keyof typeof Roles, options: ReplayOptions = {}): Promise<AuditReport> =>
  Effect.runPromise(replayOver({ servers, ...Roles[role] }, options))

/** The names of the checks that failed. */
export const failedChecks = (r: AuditReport): Array<CheckName> => r.checks.filter((c) => c.status === "failed").map((c) => c.name)

/** A report's check by name. */
export const checkOf = (r: AuditReport, name: CheckName) => r.checks.find((c) => c.name === name)!

/**
 * An approval of `held` by `witness`, signed with `secretKey` (a key the forger made), built on
 * a real `attestation.accepted` body: what a forger holding the kernel's NATS credentials writes.
 */
export const forgedApproval = (
  template: Record<string, unknown>,
  held: { held_id: string; generation: number; call_digest: string; contract_digest: string },
  witness: string,
  secretKey: Uint8Array,
  /** The time the approval claims (default now): signed as its issued_at and recorded as its at. */
  at: Date = new Date()
): Record<string, unknown> => {
  const env = template["envelope"] as { payload: Record<string, unknown> }
  const payload = { ...env.payload, ...held, principal: witness, class: "human", decision: "approve", nonce: `forged-${witness}`, issued_at: at.toISOString(), expires_at: new Date(at.getTime() + 3_600_000).toISOString() }
  const digest = jcsDigest(payload)
  return {
    ...template,
    ...held,
    witness,
    class: "human",
    decision: "approve",
    nonce: payload.nonce,
    issued_at: payload.issued_at,
    expires_at: payload.expires_at,
    at: payload.issued_at,
    attestation_digest: digest,
    event_id: `attestation.accepted:${held.held_id}:${digest}`,
    envelope: signEnvelope(payload, secretKey)
  }
}

/** A trust root for the test organization: its admins' dev keys and the profile set it starts with. */
export const trustRootFor = (profiles: ReadonlyArray<Profile>): TrustRoot => ({
  format: "wk.trust/1",
  admins: Object.fromEntries(profiles.flatMap((p) => (p.admins ?? []).map((a) => [a, [devPublicKey(a)]]))),
  startup_profiles: [startupDigest(profiles)],
  kernel_keys: []
})
