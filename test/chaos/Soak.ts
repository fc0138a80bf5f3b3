import type { NatsConnection } from "@nats-io/transport-node"
import { Effect } from "effect"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { Delivery, WitnessClient } from "../../runtime/client/Client.js"
import { replayOver } from "../../runtime/audit/Replay.js"
import { natsOptionsFromUrl } from "../../runtime/ledger/Nats.js"
import type { AuditReport } from "../../runtime/audit/AuditReport.js"
import { clientFor as testClient, connectAs, testProfile } from "../support/Principals.js"
import type { Roles } from "../support/TestNats.js"
import { profileDir } from "../support/KernelProcess.js"
import { HostileWindows } from "./HostileWindows.js"
import { KernelPool } from "./KernelPool.js"
import { readOutcomes, type StreamOutcomes } from "./Outcomes.js"
import { prng, retrying } from "./Retry.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import type { Topology } from "./Topology.js"

export interface SoakOptions {
  readonly topology: Topology
  readonly agents: number
  readonly callsPerAgent: number
  readonly kernels: number
  readonly witnesses: number
  /** Mean time between SIGKILLs of a random kernel (0: none). */
  readonly kernelKillEveryMs: number
  /** SIGKILL every kernel right after every Nth effect, before the kernel records it (0: never). */
  readonly killAfterEffectEvery: number
  /** Mean time between NATS faults (0: none). */
  readonly natsFaultEveryMs: number
  /** Mean time between hostile-plugin windows (0: none), and how long each stays pinned. */
  readonly hostileEveryMs: number
  readonly hostileWindowMs: number
  /** Mean time between tool outages (the bank stops serving; 0: none), and how long each lasts. */
  readonly toolOutageEveryMs?: number
  readonly toolOutageForMs?: number
  /** Chance that a witness sends the same signed approval again a little later (across kernel kills). */
  readonly witnessRetryChance?: number
  /** How long a held call may wait before it expires, and how late after that it may still end. */
  readonly heldTtlMs?: number
  readonly endGraceMs?: number
  /** Hard bound on the whole run. */
  readonly deadlineMs: number
  readonly seed: number
  readonly log: (line: string) => void
}

export type Kind = "allow" | "deny" | "held"

interface CallRecord {
  readonly kind: Kind
  readonly heldId: string
  outcome: string
  attempts: number
  /** Proposal to the answer the agent acts on (ALLOW/DENY), or approval to delivery (held). */
  latencyMs: number
}

export interface SoakReport {
  readonly ok: boolean
  readonly topology: string
  readonly seed: number
  readonly duration_ms: number
  readonly calls: { readonly total: number; readonly allow: number; readonly deny: number; readonly held: number; readonly policy_changes: number }
  readonly outcomes: Record<string, number>
  readonly faults: { readonly kernel_kills: number; readonly kills_after_effect: number; readonly nats_faults: number; readonly hostile_windows: number; readonly fail_closed_decisions: number; readonly tool_outages: number; readonly witness_resends: number }
  readonly recoveries: number
  readonly effects: number
  readonly completed_transfers: number
  readonly duplicates: number
  readonly lost: number
  readonly not_final: number
  readonly latency_ms: { readonly allow_p50: number; readonly allow_p99: number; readonly release_p50: number; readonly release_p99: number }
  readonly client_retries: number
  readonly audit: { readonly ok: boolean; readonly held_calls: number; readonly events: number; readonly failed_checks: ReadonlyArray<string> }
  readonly problems: ReadonlyArray<string>
}

/** Soak clients give up on one request after 5 s and send it again (the kernel may have died holding it). */
const RequestTimeoutMs = 5000
const clientFor = (nc: NatsConnection, principal: string): WitnessClient => testClient(nc, principal, RequestTimeoutMs)

const quantile = (xs: ReadonlyArray<number>, q: number): number => {
  if (xs.length === 0) return 0
  const s = [...xs].sort((a, b) => a - b)
  return Math.round(s[Math.min(s.length - 1, Math.floor(q * s.length))]! * 10) / 10
}

type ProposeAnswer = { status: number; outcome?: string; held_id?: string; generation?: number; call_digest?: string; witness_request?: { contract_digest: string } }

/**
 * The soak: agents propose a seeded mix of ALLOW, DENY and held transfers; witnesses approve the
 * held ones concurrently; a fault injector SIGKILLs kernels (at random, and right after effects,
 * before the kernel records them), faults NATS, and pins hostile plugins for a while. Then it
 * checks the promise: one final outcome per proposal, the bank's effects equal the completed
 * transfers, no idempotency key applied twice, and the auditor's replay passes.
 */
export const runSoak = async (o: SoakOptions): Promise<SoakReport> => {
  const t0 = Date.now()
  const deadline = t0 + o.deadlineMs
  const random = prng(o.seed)
  const problems: Array<string> = []
  const heldTtlMs = o.heldTtlMs ?? 120_000
  const endGraceMs = o.endGraceMs ?? 30_000
  const profile = testProfile({ held_ttl_ms: heldTtlMs })
  const pool = new KernelPool(o.kernels, o.topology.kernelServers, profileDir([profile]), {
    WK_LEASE_MS: "1500",
    WK_TOOL_TIMEOUT_MS: "1000",
    WK_SWEEP_MS: "2000",
    WK_REPLICAS: String(o.topology.replicas)
  }, o.log)
  const conns: Array<NatsConnection> = []
  const conn = async (role: keyof typeof Roles) => {
    // Clients of a soak reconnect forever, quickly: NATS itself is restarted under them.
    const c = await connectAs(o.topology.servers, role, { maxReconnectAttempts: -1, reconnectTimeWait: 250, noAsyncTraces: true })
    conns.push(c)
    return c
  }
  let killsAfterEffect = 0
  let natsFaults = 0
  let toolOutages = 0
  let witnessResends = 0
  let stopFaults = false
  const faultLoops: Array<Promise<void>> = []
  try {
    o.log(`starting ${o.kernels} kernel processes on ${o.topology.name}`)
    await pool.start()
    const perKey = new Map<string, number>()
    let lastKillAt = 0
    const bank = new DemoBank({
      openingBalance: 1_000_000,
      onApplied: (_t, key) => {
        perKey.set(key, (perKey.get(key) ?? 0) + 1)
        // The window between effect and record: the kernel that dispatched is among the live ones.
        if (o.killAfterEffectEvery > 0 && perKey.size % o.killAfterEffectEvery === 0 && Date.now() - lastKillAt > 3000 && !stopFaults) {
          lastKillAt = Date.now()
          killsAfterEffect++
          for (const slot of pool.live()) pool.crash(slot, 500 + random() * 1500)
        }
      }
    })
    const bankConn = await conn("bank")
    bank.serve(bankConn)
    const kernelConn = await conn("kernel")
    const witnessConn = await conn("witness")
    const agentConns = await Promise.all(Array.from({ length: Math.min(o.agents, 4) }, () => conn("agent")))
    const agents = Array.from({ length: o.agents }, (_, i) => clientFor(agentConns[i % agentConns.length]!, i % 2 === 0 ? "agent:alice" : "agent:bob"))
    const carol = clientFor(witnessConn, "user:carol")
    const windows = new HostileWindows(clientFor(kernelConn, "admin:root"), clientFor(witnessConn, "admin:ops"), profile, o.log)

    // --- fault injector ---------------------------------------------------------------------
    const every = (meanMs: number, act: () => Promise<void>) => {
      if (meanMs <= 0) return
      faultLoops.push((async () => {
        while (!stopFaults) {
          const wait = meanMs * (0.5 + random())
          const until = Date.now() + wait
          while (!stopFaults && Date.now() < until) await new Promise((r) => setTimeout(r, 50))
          if (stopFaults) return
          await act().catch((e) => void problems.push(`fault injector: ${String(e)}`))
        }
      })())
    }
    every(o.kernelKillEveryMs, async () => {
      const live = pool.live()
      if (live.length > 0) pool.crash(live[Math.floor(random() * live.length)]!, 300 + random() * 1500)
    })
    every(o.natsFaultEveryMs, async () => {
      natsFaults++
      o.log(await o.topology.fault())
    })
    // A tool outage: nobody serves the bank's subjects for a while (requests reach no one).
    every(o.toolOutageEveryMs ?? 0, async () => {
      toolOutages++
      bank.stop()
      await new Promise((r) => setTimeout(r, o.toolOutageForMs ?? 1500))
      bank.serve(bankConn)
    })
    let windowNo = 0
    every(o.hostileEveryMs, async () => {
      const k = windowNo++
      const name = await windows.open(k, deadline)
      o.log(`hostile plugin ${name} pinned`)
      await new Promise((r) => setTimeout(r, o.hostileWindowMs))
      await windows.close(k, deadline)
      o.log(`hostile plugin ${name} removed (restore approved by a second admin)`)
    })

    // --- witnesses --------------------------------------------------------------------------
    type Pending = { heldId: string; generation: number; callDigest: string; contractDigest: string; approved: (at: number) => void }
    const queue: Array<Pending> = []
    let proposing = true
    const witnessLoop = async () => {
      while (proposing || queue.length > 0) {
        const p = queue.shift()
        if (p === undefined) {
          await new Promise((r) => setTimeout(r, 20))
          continue
        }
        await new Promise((r) => setTimeout(r, random() * 200))
        // A witness retries exactly the bytes it signed (a kernel may have died after recording them).
        const now = Date.now()
        const bytes = new TextEncoder().encode(JSON.stringify(carol.sign({
          op: "attest", held_id: p.heldId, generation: p.generation, call_digest: p.callDigest, contract_digest: p.contractDigest, class: "human", decision: "approve",
          issued_at: new Date(now).toISOString(), expires_at: new Date(now + 10 * 60_000).toISOString(), nonce: `soak-${p.heldId}`
        })))
        const send = () => retrying(`attest ${p.heldId}`, async () => {
          const a = await carol.request<{ status: number; reason?: string }>(Subjects.attest, bytes)
          if (a.status === 202 || a.status === 200 || a.status === 409) return a
          if (a.status === 422) throw new Error(`attestation refused: ${a.reason}`)
          return undefined
        }, deadline)
        const r = await send().catch((e) => (problems.push(String(e)), undefined))
        if (r !== undefined) p.approved(Date.now())
        if (r !== undefined && random() < (o.witnessRetryChance ?? 0)) {
          witnessResends++
          await new Promise((r) => setTimeout(r, random() * 2000))
          await send().catch((e) => void problems.push(String(e)))
        }
      }
    }

    // --- agents -----------------------------------------------------------------------------
    const records: Array<CallRecord> = []
    let retries = 0
    const propose = async (agent: WitnessClient, a: number, i: number): Promise<void> => {
      const draw = random()
      const kind: Kind = draw < 0.5 ? "allow" : draw < 0.65 ? "deny" : "held"
      const amount = kind === "allow" ? 1 + Math.floor(random() * 100) : kind === "deny" ? 200_000 : 1500 + Math.floor(random() * 3000)
      const input = { session_id: `chaos-${a}`, turn_id: "t1", call_id: `c${a}-${i}`, tool: "money_transfer", args: { from: `acct-${a}-${i}`, to: `shop-${a}`, amount } }
      const started = Date.now()
      const answered = await retrying(`propose ${input.call_id}`, async () => {
        const r = (await agent.propose(input as never)) as ProposeAnswer
        return r.status === 200 || r.status === 202 || r.status === 403 || r.status === 409 ? r : undefined
      }, deadline)
      retries += answered.attempts - 1
      const r = answered.value
      const rec: CallRecord = { kind, heldId: r.held_id ?? "", outcome: r.outcome ?? `status ${r.status}`, attempts: answered.attempts, latencyMs: Date.now() - started }
      records.push(rec)
      if (r.status !== 202) return
      let approvedAt = 0
      queue.push({ heldId: rec.heldId, generation: r.generation!, callDigest: r.call_digest!, contractDigest: r.witness_request!.contract_digest, approved: (at) => (approvedAt = at) })
      const delivered = await retrying(`result of ${rec.heldId}`, async () => {
        const d: Delivery = await agent.result(rec.heldId, { sessionId: input.session_id, timeoutMs: 10_000 })
        return d
      }, deadline)
      retries += delivered.attempts - 1
      rec.outcome = delivered.value.outcome
      rec.latencyMs = Date.now() - (approvedAt || started)
    }
    const agentLoop = async (a: number) => {
      for (let i = 0; i < o.callsPerAgent && Date.now() < deadline; i++) {
        await propose(agents[a]!, a, i).catch((e) => void problems.push(String(e)))
        if (i % 10 === 9) o.log(`agent ${a}: ${i + 1}/${o.callsPerAgent} calls`)
      }
    }
    const witnessesDone = Promise.all(Array.from({ length: o.witnesses }, witnessLoop))
    await Promise.all(Array.from({ length: o.agents }, (_, a) => agentLoop(a)))
    proposing = false
    await witnessesDone
    stopFaults = true
    await Promise.all(faultLoops)
    o.log(`all ${records.length} calls answered; letting kernels settle`)
    await pool.settled()

    // --- the checks -------------------------------------------------------------------------
    // Every held call reaches its end; the fold of the stream is the truth, not the replies.
    let outcomes: StreamOutcomes = await readOutcomes(kernelConn)
    const settleBy = Math.min(deadline, Date.now() + 60_000)
    while (outcomes.open.length > 0 && Date.now() < settleBy) {
      await new Promise((r) => setTimeout(r, 1000))
      outcomes = await readOutcomes(kernelConn)
    }
    await new Promise((r) => setTimeout(r, 500))
    const byHeld = outcomes.calls
    for (const rec of records) {
      const final = byHeld.get(rec.heldId)
      if (final === undefined) problems.push(`call ${rec.heldId} (${rec.kind}) has no events`)
      else if (final.outcome !== rec.outcome) problems.push(`call ${rec.heldId} (${rec.kind}): the agent was told ${rec.outcome}, the log says ${final.outcome}`)
      if (rec.kind === "deny" && rec.outcome !== "denied") problems.push(`call ${rec.heldId} over the deny limit ended ${rec.outcome}`)
    }
    for (const [heldId, c] of byHeld) if (c.endings > 1) problems.push(`call ${heldId} ended ${c.endings} times`)
    for (const h of outcomes.open) problems.push(`call ${h} never reached a final outcome`)
    // Every call ends within its expiry plus the grace period, whatever faults it met.
    for (const [heldId, c] of byHeld) {
      if (c.endedAt !== null && c.endedAt > c.expiresAt + endGraceMs) problems.push(`call ${heldId} ended ${c.endedAt - c.expiresAt} ms after its expiry (grace ${endGraceMs} ms)`)
    }
    // Denials of calls that policy allows or holds must come from a hostile plugin failing closed.
    for (const rec of records) {
      const c = byHeld.get(rec.heldId)
      if (rec.kind !== "deny" && rec.outcome === "denied" && c !== undefined && !c.failClosed) problems.push(`call ${rec.heldId} (${rec.kind}) denied without a plugin fault`)
    }
    const completedTransfers = [...byHeld.values()].filter((c) => c.tool === "money_transfer" && c.outcome === "completed").length
    const duplicates = [...perKey.values()].filter((n) => n > 1).length
    if (bank.effects !== completedTransfers) problems.push(`the bank applied ${bank.effects} transfers; the log completed ${completedTransfers}`)
    if (duplicates > 0) problems.push(`${duplicates} idempotency keys applied twice`)
    const notFinal = records.filter((r) => !["completed", "denied", "cancelled", "expired"].includes(r.outcome)).length

    o.log("auditor replay (auditor credentials, every check, signatures)")
    const auditor = natsOptionsFromUrl(`nats://auditor:auditor-dev@${o.topology.servers.split(",")[0]}`)
    const audit: AuditReport = await Effect.runPromise(replayOver(auditor, { settleMs: 5_000 }))
    const failed = audit.checks.filter((c) => c.status === "failed")
    if (!audit.ok) problems.push(`audit replay failed: ${failed.map((c) => `${c.name} (${c.violations.length}: ${c.violations.slice(0, 2).map((v) => `${v.held_id} seqs ${v.seqs.join(",")}: ${v.message}`).join("; ")})`).join(", ")}`)

    const count = (k: Kind) => records.filter((r) => r.kind === k).length
    const outcomeCounts: Record<string, number> = {}
    for (const r of records) outcomeCounts[r.outcome] = (outcomeCounts[r.outcome] ?? 0) + 1
    const lat = (k: Kind) => records.filter((r) => r.kind === k && r.outcome === "completed").map((r) => r.latencyMs)
    const expected = o.agents * o.callsPerAgent
    if (records.length < expected) problems.push(`${expected - records.length} of ${expected} calls were not answered before the deadline`)
    return {
      ok: problems.length === 0,
      topology: o.topology.name,
      seed: o.seed,
      duration_ms: Date.now() - t0,
      calls: { total: records.length, allow: count("allow"), deny: count("deny"), held: count("held"), policy_changes: [...byHeld.values()].filter((c) => c.tool === "kernel_policy_apply").length },
      outcomes: outcomeCounts,
      faults: { kernel_kills: pool.crashes, kills_after_effect: killsAfterEffect, nats_faults: natsFaults, hostile_windows: windows.opened, fail_closed_decisions: [...byHeld.values()].filter((c) => c.failClosed).length, tool_outages: toolOutages, witness_resends: witnessResends },
      recoveries: pool.recoveries,
      effects: bank.effects,
      completed_transfers: completedTransfers,
      duplicates,
      lost: Math.max(0, completedTransfers - bank.effects) + outcomes.open.length + (expected - records.length),
      not_final: notFinal,
      latency_ms: { allow_p50: quantile(lat("allow"), 0.5), allow_p99: quantile(lat("allow"), 0.99), release_p50: quantile(lat("held"), 0.5), release_p99: quantile(lat("held"), 0.99) },
      client_retries: retries,
      audit: { ok: audit.ok, held_calls: audit.held_calls, events: audit.events, failed_checks: failed.map((c) => c.name) },
      problems
    }
  } finally {
    stopFaults = true
    await Promise.allSettled(faultLoops)
    await pool.stop()
    await Promise.all(conns.map((c) => c.close().catch(() => undefined)))
  }
}
