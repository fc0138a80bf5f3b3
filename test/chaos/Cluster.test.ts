import { spawn } from "node:child_process"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { jetstreamManager } from "@nats-io/jetstream"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { WitnessClient, type ProposeReply } from "../../runtime/client/Client.js"
import { devKeyPair } from "../../runtime/client/DevKeys.js"
import { Buckets, Streams } from "../../runtime/schema/Subjects.js"
import { PluginBucket } from "../../runtime/ledger/PluginStore.js"
import { findNatsServer } from "../../runtime/cli/EmbeddedNats.js"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { startTestCluster, type TestCluster } from "../support/TestCluster.js"
import { connectAs, testProfile } from "../support/Principals.js"
import { profileDir, startKernelProcess, type KernelProcess } from "../support/KernelProcess.js"
import { eventually } from "../support/Stream.js"
import { HttpServer } from "@effect/platform"
import { Effect, ManagedRuntime } from "effect"
import { layerGateway } from "../../runtime/gateway/Gateway.js"
import { Roles } from "../support/TestNats.js"
import { fresh, signedAs } from "../gateway/GatewayHarness.js"

// The kernel on a 3-node JetStream cluster on loopback. Two kernel processes on
// different nodes (A on node 0, B on node 1), the bank on node 2, the agent on node 2. ALLOW
// transfers keep going while node 0 (kernel A's) is SIGKILLed and later restarted; each call is
// retried under its own call_id until it completes (a retry is the same call, never a second
// execution). Afterwards: every call completed, one bank effect per call, no key applied twice.
let cluster: TestCluster
const kernels: Array<KernelProcess> = []
const conns: Array<NatsConnection> = []
const enabled = findNatsServer() !== null
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
let sharedBank: DemoBank | undefined

/** `wk audit replay` as its own process, with a NATS_URL listing several nodes. */
const auditReplay = (natsUrl: string): Promise<{ code: number | null; out: string }> =>
  new Promise((resolve) => {
    const child = spawn(process.execPath, ["--disable-warning=ExperimentalWarning", "--import", "tsx", join(repoRoot, "runtime/cli/main.ts"), "audit", "replay", "--no-trust", "--quiet"], {
      cwd: repoRoot,
      env: { ...process.env, NATS_URL: natsUrl },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    child.stdout.on("data", (d: Buffer) => (out += d.toString()))
    child.stderr.on("data", (d: Buffer) => (out += d.toString()))
    child.once("exit", (code) => resolve({ code, out }))
  })

beforeAll(async () => {
  if (enabled) cluster = await startTestCluster(3)
}, 60_000)

afterAll(async () => {
  if (process.env["WK_CLUSTER_DEBUG"]) kernels.forEach((k, i) => console.log(`--- kernel ${i}\n${k.output().slice(-3000)}`))
  await Promise.all(kernels.map((k) => k.kill()))
  await Promise.all(conns.map((c) => c.close().catch(() => undefined)))
  await cluster?.dispose()
})

describe.skipIf(!enabled)("3-node NATS cluster", () => {
  it("replicated streams and buckets; calls complete through a node kill and restart, one effect each", async () => {
    const profiles = profileDir([testProfile()])
    const env = { WK_REPLICAS: "3" }
    const n = cluster.nodes
    const kernelA = await startKernelProcess(n[0]!.servers, profiles, env)
    kernels.push(kernelA)
    const kernelB = await startKernelProcess(n[1]!.servers, profiles, env)
    kernels.push(kernelB)

    const applied = new Map<string, number>()
    const toolConn = await connectAs(n[2]!.servers, "bank", { maxReconnectAttempts: -1 })
    conns.push(toolConn)
    const bank = new DemoBank({ onApplied: (_t, key) => void applied.set(key, (applied.get(key) ?? 0) + 1) }).serve(toolConn)
    sharedBank = bank
    const agentConn = await connectAs(n[2]!.servers, "agent")
    conns.push(agentConn)
    const alice = WitnessClient.over(agentConn, { principal: "agent:alice", secretKey: devKeyPair("agent:alice").secretKey, timeoutMs: 4000 })

    // Everything the kernel created is replicated 3 ways, one replica per node.
    const kernelConn = await connectAs(n[2]!.servers, "kernel")
    conns.push(kernelConn)
    const jsm = await jetstreamManager(kernelConn)
    const names = [Streams.events, Streams.wakes, Streams.sessions, ...Object.values(Buckets).map((b) => `KV_${b}`), `OBJ_${PluginBucket}`]
    const replicas = Object.fromEntries(await Promise.all(names.map(async (s) => {
      const si = await jsm.streams.info(s)
      return [s, { r: si.config.num_replicas, peers: 1 + (si.cluster?.replicas?.length ?? 0) }] as const
    })))
    console.log("replicas", JSON.stringify(replicas))
    for (const s of names) expect(replicas[s], s).toEqual({ r: 3, peers: 3 })

    // Calls: `workers` concurrent loops, each call retried (same call_id) until it completes.
    const completed: Array<{ i: number; at: number; tries: number; ms: number }> = []
    const failures: Array<string> = []
    let killedAt = 0
    const stamp = () => (killedAt === 0 ? "before kill" : `kill+${Date.now() - killedAt}ms`)
    let next = 0
    let stop = false
    const one = async (i: number) => {
      const started = Date.now()
      let tries = 0
      for (;;) {
        tries++
        try {
          const r: ProposeReply = await alice.propose({ session_id: "s-cluster", turn_id: "t1", call_id: `c${i}`, tool: "money_transfer", args: { from: `acct-${i % 7}`, to: "shop", amount: 1 + (i % 50) } })
          if (r.status === 200 && r.outcome === "completed" && r.ok) return completed.push({ i, at: Date.now(), tries, ms: Date.now() - started })
          failures.push(`${stamp()} c${i}#${tries}: ${JSON.stringify(r).slice(0, 300)}`)
        } catch (e) {
          failures.push(`${stamp()} c${i}#${tries}: ${String(e)}`)
        }
        if (tries > 60) throw new Error(`c${i} did not complete in ${tries} tries:\n${failures.slice(-10).join("\n")}`)
        await sleep(250)
      }
    }
    const workers = Array.from({ length: 3 }, async () => {
      while (!stop) await one(next++)
    })
    const done = (k: number) => eventually(async () => completed.length >= k, 40_000, 20)
    const t0 = Date.now()
    await done(15)
    // Which node leads each stream when node 0 dies (the ones it leads must elect a new leader).
    const leaders = Object.fromEntries(await Promise.all(names.map(async (s) => [s, (await jsm.streams.info(s)).cluster?.leader ?? "?"] as const)))
    const ledByNode0 = names.filter((s) => leaders[s] === n[0]!.name)

    // Node 0 dies mid-run: kernel A loses its server and must reconnect to node 1 or 2.
    const before = completed.length
    killedAt = Date.now()
    await cluster.kill(0)
    await done(before + 1)
    const firstAfterKill = Date.now() - killedAt
    await done(before + 15)
    // Only kernel A now: calls complete only if A reconnected to a live node.
    await kernelB.stop()
    const kernelBStoppedMs = Date.now() - killedAt
    const aloneFrom = completed.length
    await done(aloneFrom + 10)
    const aloneDone = completed.length

    // Node 0 comes back and catches up; more calls complete.
    const restartAt = Date.now()
    const restartAfterKillMs = restartAt - killedAt
    await cluster.restart(0)
    const rejoinMs = Date.now() - restartAt
    await cluster.waitCurrent(names)
    const currentMs = Date.now() - restartAt
    const afterRestart = completed.length
    await done(afterRestart + 15)
    stop = true
    await Promise.all(workers)
    const elapsed = Date.now() - t0

    await sleep(300)
    const duplicates = [...applied.entries()].filter(([, c]) => c > 1)
    const retried = completed.filter((c) => c.tries > 1).length
    const slowest = [...completed].sort((a, b) => b.ms - a.ms).slice(0, 3).map((c) => ({ call: `c${c.i}`, ms: c.ms, tries: c.tries, after_kill_ms: c.at - c.ms - killedAt }))
    console.log(JSON.stringify({
      completed: completed.length,
      effects: bank.effects,
      duplicates: duplicates.length,
      killed_after: before,
      led_by_killed_node: ledByNode0,
      first_completion_after_kill_ms: firstAfterKill,
      kernel_a_alone: aloneDone - aloneFrom,
      kernel_b_stopped_at_kill_plus_ms: kernelBStoppedMs,
      node0_restarted_at_kill_plus_ms: restartAfterKillMs,
      node0_rejoin_ms: rejoinMs,
      replicas_current_after_restart_ms: currentMs,
      retried_calls: retried,
      slowest,
      failed_attempts: failures.length,
      elapsed_ms: elapsed
    }))
    if (failures.length > 0) console.log("failed attempts (first 40):\n" + failures.slice(0, 40).join("\n"))
    // The auditor re-derives every decision from the replicated log, through a multi-node NATS_URL.
    const audit = await auditReplay(`nats://auditor:auditor-dev@${n[0]!.servers},${n[1]!.servers},${n[2]!.servers}`)
    console.log(`audit replay (exit ${audit.code}):\n${audit.out.slice(-1500)}`)
    expect(audit.code).toBe(0)
    expect(kernelA.child.exitCode).toBeNull()
    expect(new Set(completed.map((c) => c.i)).size).toBe(completed.length)
    expect(bank.effects).toBe(completed.length)
    expect(applied.size).toBe(completed.length)
    expect(duplicates).toEqual([])
  }, 120_000)

  it("the deployment's topology: the gateway in front of two kernels on the cluster; with one kernel killed a call through the gateway completes once", async () => {
    const bank = sharedBank!
    const n = cluster.nodes
    // Two kernels again (the test before stopped kernel B): A on node 0, a new one on node 1.
    kernels.push(await startKernelProcess(n[1]!.servers, profileDir([testProfile()]), { WK_REPLICAS: "3" }))
    const gateway = ManagedRuntime.make(layerGateway({ nats: { servers: [n[2]!.servers, n[0]!.servers, n[1]!.servers], ...Roles.gateway }, port: 0 }))
    try {
      const address = await gateway.runPromise(Effect.map(HttpServer.HttpServer, (srv) => srv.address))
      if (address._tag !== "TcpAddress") throw new Error("gateway is not on TCP")
      const url = `http://127.0.0.1:${address.port}`
      expect((await fetch(`${url}/readyz`)).status).toBe(200)
      await kernels[0]!.kill()
      const before = bank.effects
      const body = signedAs("agent:alice", { op: "propose", session_id: "s-deploy", turn_id: "t1", call_id: "via-gateway", tool: "money_transfer", args: { from: "alice", to: "bob", amount: 42 }, ...fresh() })
      const tries: Array<string> = []
      // A request the killed kernel had taken is answered 503 by the gateway: the same signed call is sent again.
      const reply = await eventually(async () => {
        const r = await fetch(`${url}/tool-calls`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
        const json = (await r.json()) as { outcome?: string }
        if (r.status !== 200) tries.push(`${r.status} ${JSON.stringify(json).slice(0, 300)}`)
        return r.status === 200 ? json : undefined
      }, 60_000).catch((e: unknown) => { throw new Error(`${String(e)}; answers: ${tries.slice(0, 5).join(" | ")}`) })
      expect(reply).toMatchObject({ outcome: "completed" })
      // Sent again as often as it took, the call ran once.
      expect(bank.effects).toBe(before + 1)
    } finally {
      await gateway.dispose()
    }
  }, 120_000)
})
