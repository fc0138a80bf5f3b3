// The durable floor: a process that does, for each request, the least durable work a call needs
// and nothing else. ALLOW: commit A before the effect (proposal, verdict, claim and dispatch as ONE
// JetStream message, stored only if the call's subject is still empty: expected-last-subject-
// sequence 0), with the recovery wake published in the same socket flush; the tool round trip;
// commit B after it (effect and admission as one message, CAS on A's sequence); the reply. A held
// release: commit A (acceptance, readiness, claim and dispatch, CAS on the held commit) with its
// wake, the tool round trip, commit B, then the delivery to the session stream. It runs as its own
// process, like `wk kernel`, so it makes the same process hops as the kernel path it is compared
// with: agent -> NATS -> kernel -> NATS -> tool and back.
import { spawn, type ChildProcess } from "node:child_process"
import { randomBytes } from "node:crypto"
import { join } from "node:path"
import { DiscardPolicy, jetstreamManager, RetentionPolicy, StorageType } from "@nats-io/jetstream"
import { connect, createInbox, headers as natsHeaders, type Msg, type MsgHdrs, type NatsConnection } from "@nats-io/transport-node"
import { repoRoot } from "../runtime/cli/Paths.js"
import { devKeyPair } from "../runtime/client/DevKeys.js"
import { sha256Hex } from "../runtime/schema/Canonical.js"
import { signEnvelope } from "../runtime/schema/EnvelopeSignature.js"
import type { JsonValue } from "../runtime/schema/Json.js"
import { inboxOptionOf, Subjects } from "../runtime/schema/Subjects.js"
import { loadCallWork } from "./internal/callWork.js"

export const FloorAllowSubject = "bench.floor.allow"
export const FloorHoldSubject = "bench.floor.hold"
export const FloorReleaseSubject = "bench.floor.release"
/** The durable floor's ALLOW with the work no kernel can skip (bench/internal/callWork.ts): the work floor. */
export const FloorWorkAllowSubject = "bench.floor.allow.work"
/** A held call for the work floor's release, not timed: replies its id and the digests a witness binds to. */
export const FloorWorkHoldSubject = "bench.floor.hold.work"
/** The work floor's release: a signed attestation; the session it delivers to in the `Session` header. */
export const FloorWorkReleaseSubject = "bench.floor.release.work"
/** Under wk.v1.tools so the bench's echo tool user (tool role) may serve it. */
export const FloorToolSubject = Subjects.toolInvoke("bench_echo")
/** The session subject the held-release floor delivers to (a stream of its own, like WK_SESSIONS). */
export const floorSessionSubject = (session: string) => `bench.floor.sessions.${session}`

/**
 * The floor's streams: the same settings as the kernel's WK_EVENTS, WK_WAKES and WK_SESSIONS
 * (file store, 2-minute duplicate window, one pending wake per call), under subjects of its own
 * so that the kernel's log is not touched.
 */
export const FloorStreams = {
  events: { name: "BENCH_FLOOR_EVENTS", subject: (id: string) => `bench.floor.events.${id}` },
  wakes: { name: "BENCH_FLOOR_WAKES", subject: (id: string) => `bench.floor.wakes.${id}` },
  sessions: { name: "BENCH_FLOOR_SESSIONS" }
} as const

const TwoMinutesNs = 120 * 1_000_000_000

export const provisionFloorStreams = async (nc: NatsConnection): Promise<void> => {
  const jsm = await jetstreamManager(nc)
  const configs = [
    { name: FloorStreams.events.name, subjects: ["bench.floor.events.>"], storage: StorageType.File, retention: RetentionPolicy.Limits, discard: DiscardPolicy.Old, duplicate_window: TwoMinutesNs, allow_direct: true },
    { name: FloorStreams.wakes.name, subjects: ["bench.floor.wakes.>"], storage: StorageType.File, retention: RetentionPolicy.Workqueue, discard: DiscardPolicy.Old, max_msgs_per_subject: 1 },
    { name: FloorStreams.sessions.name, subjects: ["bench.floor.sessions.>"], storage: StorageType.File, retention: RetentionPolicy.Limits, duplicate_window: TwoMinutesNs, allow_direct: true }
  ]
  for (const c of configs) {
    const exists = await jsm.streams.info(c.name).then(() => true, () => false)
    if (!exists) await jsm.streams.add(c)
  }
}

/**
 * What the floor's streams hold: what a smoke test checks (2 commits per call; 1 wake written per
 * call, `wakes`, and deleted once commit B is stored, so `pendingWakes` drains to 0, as a kernel must).
 */
export const floorStreamCounts = async (nc: NatsConnection): Promise<{ events: number; wakes: number; pendingWakes: number; sessions: number }> => {
  const jsm = await jetstreamManager(nc)
  const state = async (name: string) => (await jsm.streams.info(name)).state
  const wakes = await state(FloorStreams.wakes.name)
  return { events: (await state(FloorStreams.events.name)).messages, wakes: wakes.last_seq, pendingWakes: wakes.messages, sessions: (await state(FloorStreams.sessions.name)).messages }
}

/**
 * Request/reply over one wildcard inbox subscription (no per-request timer, deferred or Error, as
 * the kernel's own requester): the floor must not pay client-library costs the kernel avoids.
 */
const leanRequester = (nc: NatsConnection, inboxPrefix: string | undefined) => {
  const prefix = `${createInbox(inboxPrefix)}.`
  const waiting = new Map<number, { resolve: (m: Msg) => void; reject: (e: Error) => void; deadline: number }>()
  let next = 0
  nc.subscribe(`${prefix}*`, {
    callback: (err, msg) => {
      if (err !== null) return
      const id = Number(msg.subject.slice(prefix.length))
      const w = waiting.get(id)
      if (w === undefined) return
      waiting.delete(id)
      w.resolve(msg)
    }
  })
  setInterval(() => {
    const now = Date.now()
    for (const [id, w] of waiting) if (w.deadline <= now) (waiting.delete(id), w.reject(new Error("floor request timed out")))
  }, 100).unref()
  return (subject: string, data: Uint8Array, headers?: MsgHdrs): Promise<Msg> =>
    new Promise((resolve, reject) => {
      const id = ++next
      waiting.set(id, { resolve, reject, deadline: Date.now() + 5000 })
      nc.publish(subject, data, { reply: prefix + id, ...(headers ? { headers } : {}) })
    })
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** A JetStream publish over the lean requester: the PubAck's sequence, or an error (a failed CAS too). */
const publisher = (request: ReturnType<typeof leanRequester>) => (subject: string, data: Uint8Array, msgID?: string, lastSubjectSequence?: number): Promise<number> => {
  const h = natsHeaders()
  if (msgID !== undefined) h.set("Nats-Msg-Id", msgID)
  if (lastSubjectSequence !== undefined) h.set("Nats-Expected-Last-Subject-Sequence", String(lastSubjectSequence))
  return request(subject, data, h).then((m) => {
    if (m.data.length === 0) throw new Error(`JetStream publish to ${subject} failed: ${m.headers?.status ?? "empty ack"}`)
    const r = JSON.parse(decoder.decode(m.data)) as { seq?: number; error?: { description?: string } }
    if (r.error !== undefined || typeof r.seq !== "number") throw new Error(`JetStream publish to ${subject} refused: ${r.error?.description ?? "no sequence"}`)
    return r.seq
  })
}

/** One commit: the events of one decision as one message (the body a kernel would write). */
const commitOf = (commitId: string, events: ReadonlyArray<string>, call: string): Uint8Array =>
  encoder.encode(JSON.stringify({ commit_id: commitId, at: Date.now(), events: events.map((type, i) => ({ id: `${commitId}.${i}`, type, ...(i === 0 ? { call } : {}) })) }))

const serveFloor = async (servers: string) => {
  const nc = await connect({ servers: servers.split(","), user: "kernel", pass: "kernel-dev", name: "bench durable floor", noAsyncTraces: true, ...inboxOptionOf("kernel") })
  await provisionFloorStreams(nc)
  const request = leanRequester(nc, "_INBOX_kernel")
  const publish = publisher(request)
  const run = `${process.pid}_${randomBytes(4).toString("hex")}`
  let n = 0
  /** Commit A (CAS on `expected`) and the call's recovery wake in one flush, both acks awaited: commit A's sequence and the wake's. */
  const commitWithWake = async (id: string, a: Uint8Array, expected: number): Promise<{ readonly seq: number; readonly wake: number }> => {
    const wake = publish(FloorStreams.wakes.subject(id), new Uint8Array(0))
    const seq = await publish(FloorStreams.events.subject(id), a, `${id}.a`, expected)
    return { seq, wake: await wake }
  }
  /**
   * The call is settled (commit B stored): its wake is deleted by sequence, fire and forget, as the
   * kernel retires the wakes it wrote (runtime/ledger/Wakes.ts `retire`).
   */
  const retire = (wake: number): void =>
    void request(`$JS.API.STREAM.MSG.DELETE.${FloorStreams.wakes.name}`, encoder.encode(JSON.stringify({ seq: wake, no_erase: true }))).catch(() => undefined)
  /** Commit A and its wake in one flush, both acks awaited; then the tool; then commit B; the wake deleted. Returns the tool's reply. */
  const twoCommits = async (id: string, call: string, body: Uint8Array, aEvents: ReadonlyArray<string>, aExpected: number, bEvents: ReadonlyArray<string>) => {
    const a = await commitWithWake(id, commitOf(`${id}.a`, aEvents, call), aExpected)
    const tool = await request(FloorToolSubject, body)
    await publish(FloorStreams.events.subject(id), commitOf(`${id}.b`, bEvents, decoder.decode(tool.data)), `${id}.b`, a.seq)
    retire(a.wake)
    return tool
  }
  nc.subscribe(FloorAllowSubject, {
    callback: (_e, m) =>
      void (async () => {
        const id = `${run}_${++n}`
        const tool = await twoCommits(id, decoder.decode(m.data), m.data, ["call.proposed", "call.adjudicated", "execution.leased", "execution.dispatched"], 0, ["effect.recorded", "call.admitted"])
        m.respond(tool.data)
      })().catch((e) => m.respond(encoder.encode(`error: ${String(e)}`)))
  })
  // The work floor: the same exchanges, with the request checked, the four plugin stages run and
  // the commits shaped as a kernel must (the call's real stage records in them).
  const work = await loadCallWork()
  nc.subscribe(FloorWorkAllowSubject, {
    callback: (_e, m) =>
      void (async () => {
        const id = `${run}_${++n}`
        const call = work.accept(m.data)
        const stages = await work.adjudicate(call, Date.now())
        const a = work.commitA(id, call, stages, "", Date.now())
        const seqA = await commitWithWake(id, a, 0)
        const p = call.payload
        const tool = await request(FloorToolSubject, encoder.encode(JSON.stringify({ held_id: id, idempotency_key: `${id}:g1`, tool: p.tool, args: p.args })))
        const result = JSON.parse(decoder.decode(tool.data)) as JsonValue
        const admitted = await work.admit(call.payload, result, Date.now())
        await publish(FloorStreams.events.subject(id), work.commitB(id, result, admitted, a, Date.now()), `${id}.b`, seqA.seq)
        retire(seqA.wake)
        m.respond(encoder.encode(JSON.stringify({ status: 200, outcome: "executed", held_id: id, result })))
      })().catch((e) => m.respond(encoder.encode(`error: ${String(e)}`)))
  })
  // The work floor's held calls (one commit each) and their release: the attestation checked and
  // bound, commit A, the witness's answer, the tool, the admission stage, commit B, the delivery.
  const held = new Map<string, { readonly callDigest: string; readonly contractDigest: string; readonly seq: number; readonly head: Uint8Array }>()
  nc.subscribe(FloorWorkHoldSubject, {
    callback: (_e, m) =>
      void (async () => {
        const id = `h_${randomBytes(16).toString("hex")}`
        const h = commitOf(`${id}.h`, ["call.proposed", "call.adjudicated", "call.held"], decoder.decode(m.data))
        const seq = await publish(FloorStreams.events.subject(id), h, `${id}.h`, 0)
        const digests = { callDigest: randomBytes(32).toString("hex"), contractDigest: randomBytes(32).toString("hex") }
        held.set(id, { ...digests, seq, head: h })
        m.respond(encoder.encode(JSON.stringify({ id, call_digest: digests.callDigest, contract_digest: digests.contractDigest })))
      })().catch((e) => m.respond(encoder.encode(`error: ${String(e)}`)))
  })
  nc.subscribe(FloorWorkReleaseSubject, {
    callback: (_e, m) =>
      void (async () => {
        const attested = work.acceptAttestation(m.data, (id) => held.get(id))
        const id = attested.payload.held_id
        const h = held.get(id)!
        held.delete(id)
        const a = work.releaseCommitA(id, attested, sha256Hex(h.head), Date.now())
        const seqA = await commitWithWake(id, a, h.seq)
        m.respond(encoder.encode(JSON.stringify({ disposition: "accepted", held_id: id })))
        const tool = await request(FloorToolSubject, encoder.encode(JSON.stringify({ held_id: id, idempotency_key: `${id}:g1`, tool: "money_transfer", args: { amount: 5000 } })))
        const result = JSON.parse(decoder.decode(tool.data)) as JsonValue
        const now = Date.now()
        const admitted = await work.admit({ principal: "agent:alice", tool: "money_transfer", args: { amount: 5000 } }, result, now)
        await publish(FloorStreams.events.subject(id), work.commitB(id, result, admitted, a, now), `${id}.b`, seqA.seq)
        retire(seqA.wake)
        await publish(floorSessionSubject(m.headers?.get("Session") ?? "none"), work.delivery(id, result, Date.now()), `${id}.d`)
      })().catch((e) => m.respond(encoder.encode(`error: ${String(e)}`)))
  })
  // A held call, not timed: one commit (proposal and the verdict that holds it). Replies its id and sequence.
  nc.subscribe(FloorHoldSubject, {
    callback: (_e, m) =>
      void (async () => {
        const id = `${run}_${++n}`
        const seq = await publish(FloorStreams.events.subject(id), commitOf(`${id}.h`, ["call.proposed", "call.adjudicated"], decoder.decode(m.data)), `${id}.h`, 0)
        m.respond(encoder.encode(JSON.stringify({ id, seq })))
      })().catch((e) => m.respond(encoder.encode(`error: ${String(e)}`)))
  })
  // The release: the attestation's reply once commit A is stored; the delivery after commit B.
  nc.subscribe(FloorReleaseSubject, {
    callback: (_e, m) =>
      void (async () => {
        const { id, seq, session } = JSON.parse(decoder.decode(m.data)) as { id: string; seq: number; session: string }
        const a = await commitWithWake(id, commitOf(`${id}.a`, ["attestation.accepted", "call.ready", "execution.leased", "execution.dispatched"], ""), seq)
        m.respond(encoder.encode("accepted"))
        const tool = await request(FloorToolSubject, m.data)
        await publish(FloorStreams.events.subject(id), commitOf(`${id}.b`, ["effect.recorded", "call.admitted"], decoder.decode(tool.data)), `${id}.b`, a.seq)
        retire(a.wake)
        await publish(floorSessionSubject(session), encoder.encode(JSON.stringify({ held_id: id, result: decoder.decode(tool.data) })), `${id}.d`)
      })().catch((e) => m.respond(encoder.encode(`error: ${String(e)}`)))
  })
  await nc.flush()
  console.log("durable floor ready")
}

/** Starts the floor process against `servers`; resolves once it serves. */
export const startDurableFloor = async (servers: string): Promise<ChildProcess> => {
  const child = spawn(process.execPath, ["--disable-warning=ExperimentalWarning", "--import", "tsx", join(repoRoot, "bench/durable-floor.ts"), servers], { cwd: repoRoot, stdio: ["ignore", "pipe", "inherit"] })
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (d: Buffer) => d.toString().includes("durable floor ready") && resolve())
    child.once("exit", (code) => reject(new Error(`bench/durable-floor.ts exited with ${code}`)))
  })
  return child
}

const checked = (m: Msg): Msg => {
  if (m.data.length >= 6 && decoder.decode(m.data.subarray(0, 6)) === "error:") throw new Error(`durable floor: ${decoder.decode(m.data)}`)
  return m
}

/** Sequential ALLOW floor calls from `client` (a kernel-role connection): each call's latency in ms. */
export const floorAllowLatencies = async (client: NatsConnection, n: number, payload: string): Promise<Array<number>> => {
  const out: Array<number> = []
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    checked(await client.request(FloorAllowSubject, payload, { timeout: 5000 }))
    out.push(performance.now() - t0)
  }
  return out
}

/** ALLOW floor calls from `agents` concurrent callers: calls per second. */
export const floorAllowThroughput = async (client: NatsConnection, total: number, payload: string, agents = 64): Promise<number> => {
  let left = total
  const t0 = performance.now()
  await Promise.all(
    Array.from({ length: agents }, async () => {
      while (left-- > 0) checked(await client.request(FloorAllowSubject, payload, { timeout: 10_000 }))
    })
  )
  return total / ((performance.now() - t0) / 1000)
}

let workSeq = 0
/** A proposal signed as the kernel bench's agent signs each of its own (a fresh nonce and expiry per call). */
const signedProposal = (secretKey: Uint8Array): Uint8Array => {
  const i = ++workSeq
  return encoder.encode(
    JSON.stringify(
      signEnvelope(
        { op: "propose", principal: "agent:alice", session_id: "floor", turn_id: "t", call_id: `w${i}`, tool: "money_transfer", args: { from: `a${i}`, to: "b", amount: 10 }, nonce: randomBytes(12).toString("hex"), expires_at: new Date(Date.now() + 60_000).toISOString() },
        secretKey
      )
    )
  )
}

/** Sequential work-floor calls from `client`, each signed here before its timed window opens: each call's latency in ms. */
export const workFloorLatencies = async (client: NatsConnection, n: number): Promise<Array<number>> => {
  const key = devKeyPair("agent:alice").secretKey
  const out: Array<number> = []
  for (let i = 0; i < n; i++) {
    const body = signedProposal(key)
    const t0 = performance.now()
    checked(await client.request(FloorWorkAllowSubject, body, { timeout: 5000 }))
    out.push(performance.now() - t0)
  }
  return out
}

/** Work-floor calls from `agents` concurrent callers, all signed here before the clock starts: calls per second. */
export const workFloorThroughput = async (client: NatsConnection, total: number, agents = 64): Promise<number> => {
  const key = devKeyPair("agent:alice").secretKey
  const bodies = Array.from({ length: total }, () => signedProposal(key))
  let left = total
  const t0 = performance.now()
  await Promise.all(
    Array.from({ length: agents }, async () => {
      while (left > 0) checked(await client.request(FloorWorkAllowSubject, bodies[--left]!, { timeout: 10_000 }))
    })
  )
  return total / ((performance.now() - t0) / 1000)
}

/**
 * Timed releases: each call is held by `hold` (not timed), its release prepared by `release` (a
 * witness's signing, not timed), then sent, timed until its delivery reaches a subscriber of the
 * session, as the kernel's release figure is; in ms.
 */
const timedReleases = async <H extends { readonly id: string }>(client: NatsConnection, n: number, hold: () => Promise<H>, release: (held: H, session: string) => () => Promise<unknown>): Promise<Array<number>> => {
  const session = `s${randomBytes(4).toString("hex")}`
  const waiting = new Map<string, (t: number) => void>()
  const sub = client.subscribe(floorSessionSubject(session), {
    callback: (_e, m) => {
      const { held_id } = JSON.parse(decoder.decode(m.data)) as { held_id: string }
      waiting.get(held_id)?.(performance.now())
      waiting.delete(held_id)
    }
  })
  await client.flush()
  const out: Array<number> = []
  try {
    for (let i = 0; i < n; i++) {
      const held = await hold()
      const delivered = new Promise<number>((resolve, reject) => {
        waiting.set(held.id, resolve)
        setTimeout(() => reject(new Error(`durable floor: no delivery of ${held.id} within 10 s`)), 10_000).unref()
      })
      const send = release(held, session)
      const t0 = performance.now()
      await send()
      out.push((await delivered) - t0)
    }
  } finally {
    sub.unsubscribe()
  }
  return out
}

const replyOf = async <A>(client: NatsConnection, subject: string, body: string): Promise<A> => JSON.parse(decoder.decode(checked(await client.request(subject, body, { timeout: 5000 })).data)) as A

/** Held-release floor: a call is held (not timed), then release -> delivery seen on the session subject, in ms. */
export const floorReleaseLatencies = (client: NatsConnection, n: number, payload: string): Promise<Array<number>> =>
  timedReleases(
    client,
    n,
    () => replyOf<{ id: string; seq: number }>(client, FloorHoldSubject, payload),
    (held, session) => () => client.request(FloorReleaseSubject, JSON.stringify({ ...held, session }), { timeout: 5000 }).then(checked)
  )

/** Work-floor release: a held call (not timed), then a witness's attestation signed here -> delivery seen on the session subject, in ms. */
export const workFloorReleaseLatencies = (client: NatsConnection, n: number): Promise<Array<number>> => {
  const key = devKeyPair("user:carol").secretKey
  return timedReleases(
    client,
    n,
    () => replyOf<{ id: string; call_digest: string; contract_digest: string }>(client, FloorWorkHoldSubject, "x".repeat(300)),
    (h, session) => {
      const now = Date.now()
      const attestation = signEnvelope(
        { op: "attest", principal: "user:carol", class: "human", held_id: h.id, generation: 1, call_digest: h.call_digest, contract_digest: h.contract_digest, decision: "approve", issued_at: new Date(now).toISOString(), expires_at: new Date(now + 600_000).toISOString(), nonce: randomBytes(12).toString("hex") },
        key
      )
      const headers = natsHeaders()
      headers.set("Session", session)
      const body = encoder.encode(JSON.stringify(attestation))
      return () => client.request(FloorWorkReleaseSubject, body, { timeout: 5000, headers }).then(checked)
    }
  )
}

if (import.meta.url === `file://${process.argv[1]}`) await serveFloor(process.argv[2]!)
