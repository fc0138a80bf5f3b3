import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DeliverPolicy, jetstream, jetstreamManager, StorageType } from "@nats-io/jetstream"
import { Effect, Either } from "effect"
import { spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { generateKernelKey, readKernelKey, type KernelKey } from "../../runtime/ledger/KernelKey.js"
import { latestCheckpoint, writeCheckpoint, type StoredCheckpoint } from "../../runtime/ledger/Checkpoints.js"
import { layerNats } from "../../runtime/ledger/Nats.js"
import { checkpointSignatureValid, encodeCheckpoint, signCheckpoint, type Checkpoint } from "../../runtime/schema/Checkpoint.js"
import { Streams } from "../../runtime/schema/Subjects.js"
import { Roles, startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventually } from "../support/Stream.js"
import { checkOf, failedChecks, replayAs, trustRootFor } from "./support.js"

// A kernel that signs its commits, a real history with signed checkpoints, and copies of the
// stream rebuilt by a forger holding the kernel's NATS credentials but not its key. Per-call
// chains cannot see a whole call removed, nor a call's newest commit: the checkpoints can, and
// a checkpoint kept outside the stream catches the newest checkpoints removed with their range.

let nats: TestNats
let kernel: InProcessKernel
let conns: Array<NatsConnection> = []
let kernelConn: NatsConnection
let key: KernelKey
let dir: string
const profile = testProfile()
let alice: ReturnType<typeof clientFor>
let carol: ReturnType<typeof clientFor>
const calls: Array<string> = []
const checkpoints: Array<StoredCheckpoint> = []

interface Raw {
  seq: number
  subject: string
  data: Uint8Array
}

const readRaw = async (nc: NatsConnection): Promise<Array<Raw>> => {
  const info = await (await jetstreamManager(nc)).streams.info(Streams.events)
  const consumer = await jetstream(nc).consumers.get(Streams.events, { deliver_policy: DeliverPolicy.All })
  const messages = await consumer.consume({ max_messages: 1000 })
  const out: Array<Raw> = []
  for await (const m of messages) {
    out.push({ seq: m.seq, subject: m.subject, data: m.data })
    if (m.info.pending === 0 || m.seq >= info.state.last_seq) break
  }
  await messages.close()
  return out
}

let copies = 0
/** The stream written again one message at a time, after `edit` (sequences renumber as a rebuilt stream's do). */
const copyRaw = async (messages: ReadonlyArray<Raw>, edit: (ms: Array<Raw>) => Array<Raw> = (ms) => ms): Promise<string> => {
  const n = ++copies
  const name = `WK_CKPT_COPY${n}`
  const prefix = `ckpt${n}.`
  await (await jetstreamManager(kernelConn)).streams.add({ name, subjects: [`${prefix}wk.v1.events.>`], storage: StorageType.Memory })
  const js = jetstream(kernelConn)
  for (const m of edit(messages.map((x) => ({ ...x })))) await js.publish(`${prefix}${m.subject}`, m.data)
  return name
}

const on = (id: string) => `wk.v1.events.${id}`
const CheckpointOn = on("_checkpoint")
const trusted = () => ({ ...trustRootFor([profile]), kernel_keys: [key.publicKey] })
const replayCopy = (stream: string, extra: { keptCheckpoint?: Uint8Array; storeSkewMs?: number } = {}) =>
  replayAs(nats.servers, "kernel", { stream, factsBucket: null, sessionsStream: null, trust: trusted(), ...extra })
const checkpointMessages = (r: Awaited<ReturnType<typeof replayCopy>>) => checkOf(r, "checkpoints").violations.map((v) => [v.held_id, v.message])

const checkpointNow = () =>
  Effect.runPromise(writeCheckpoint(key, new Date()).pipe(Effect.provide(layerNats({ servers: nats.servers, ...Roles.kernel, name: "test checkpointer" }))))

/** One completed ALLOW call; returns its held id. */
const allowed = async (n: number): Promise<string> => {
  const r = (await alice.propose({ session_id: "s-ckpt", turn_id: `t${n}`, call_id: `c${n}`, tool: "money_transfer", args: { from: "a", to: "shop", amount: 10 + n } } as never)) as { status: number; held_id: string }
  expect(r.status).toBe(200)
  return r.held_id
}

let original: Array<Raw>

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "wk-checkpoint-audit-"))
  generateKernelKey(join(dir, "kernel.key"))
  key = Either.getOrThrow(readKernelKey(join(dir, "kernel.key")))
  process.env["WK_KERNEL_KEY"] = join(dir, "kernel.key")
  process.env["WK_CHECKPOINT_INTERVAL_MS"] = "0"
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [profile])
  const [tool, agent, witness, k] = await Promise.all([connectAs(nats.servers, "bank"), connectAs(nats.servers, "agent"), connectAs(nats.servers, "witness"), connectAs(nats.servers, "kernel")])
  conns = [tool, agent, witness, k]
  kernelConn = k
  new DemoBank().serve(tool)
  alice = clientFor(agent, "agent:alice")
  carol = clientFor(witness, "user:carol")
  calls.push(await allowed(1), await allowed(2))
  checkpoints.push((await checkpointNow())!)
  calls.push(await allowed(3))
  checkpoints.push((await checkpointNow())!)
  expect(await checkpointNow()).toBeNull() // nothing new: no checkpoint of an empty range
  calls.push(await allowed(4)) // after the newest checkpoint: covered by none yet
  original = await readRaw(kernelConn)
}, 60_000)

afterAll(async () => {
  delete process.env["WK_KERNEL_KEY"]
  delete process.env["WK_CHECKPOINT_INTERVAL_MS"]
  await kernel?.stop()
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
  rmSync(dir, { recursive: true, force: true })
})

/** `wk` as a user runs it, against the test's server. */
const wk = (args: ReadonlyArray<string>) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const env: Record<string, string | undefined> = { ...process.env, NATS_URL: `nats://${nats.servers.split(",")[0]}` }
    delete env["WK_CONTEXT"]
    delete env["WK_KERNEL_KEY"]
    const child = spawn(process.execPath, [join(repoRoot, "runtime", "cli", "wk.mjs"), ...args], { cwd: repoRoot, env, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d: Buffer) => void (stdout += d.toString()))
    child.stderr.on("data", (d: Buffer) => void (stderr += d.toString()))
    child.on("close", (code) => resolve({ code, stdout, stderr }))
  })

describe("signed checkpoints", () => {
  it("the kernel's checkpoints chain, cover the stream from seq 1 without gaps, are signed by its key, and the true history passes against them", async () => {
    expect(checkpoints.map((c) => c.checkpoint.from_seq)).toEqual([1, checkpoints[0]!.checkpoint.last_seq + 1])
    expect(checkpoints.every((c) => checkpointSignatureValid(c.checkpoint) && c.checkpoint.key === key.publicKey)).toBe(true)
    const firstHeads = checkpoints[0]!.checkpoint.heads.map((h) => h[0])
    expect(firstHeads).toEqual(expect.arrayContaining([calls[0], calls[1], "_policy"]))
    expect(checkpoints[1]!.checkpoint.heads.map((h) => h[0])).toContain(calls[2])
    const r = await replayCopy(await copyRaw(original), { keptCheckpoint: checkpoints[1]!.data })
    expect(failedChecks(r)).toEqual([])
    expect(checkOf(r, "checkpoints")).toMatchObject({ status: "passed", checked: 2 })
    expect(checkOf(r, "checkpoints").note).toMatch(/2 checkpoint\(s\).*message\(s\) after seq \d+ are not covered.*1 kept checkpoint\(s\) in the chain, the newest checkpoint seq \d+/)
  })

  it("a whole call removed (every commit of it) passes the per-call chain but not the checkpoints", async () => {
    const r = await replayCopy(await copyRaw(original, (ms) => ms.filter((m) => m.subject !== on(calls[0]!))))
    expect(checkOf(r, "commit-chain").status).toBe("passed")
    expect(failedChecks(r)).toContain("checkpoints")
    expect(checkpointMessages(r)).toContainEqual([calls[0], expect.stringMatching(/history holds none of .* in that range: it was removed/)])
  })

  it("a call's newest commit removed (the tail of its chain) -> checkpoints", async () => {
    const mine = original.filter((m) => m.subject === on(calls[1]!))
    const last = mine[mine.length - 1]!
    const r = await replayCopy(await copyRaw(original, (ms) => ms.filter((m) => m.seq !== last.seq)))
    expect(failedChecks(r)).toContain("checkpoints")
    expect(checkpointMessages(r)).toContainEqual([calls[1], expect.stringMatching(/a message was removed, added or changed/)])
  })

  it("a policy record removed -> checkpoints names _policy", async () => {
    const policy = original.find((m) => m.subject === on("_policy"))!
    const r = await replayCopy(await copyRaw(original, (ms) => ms.filter((m) => m.seq !== policy.seq)))
    expect(failedChecks(r)).toContain("checkpoints")
    expect(checkpointMessages(r).map(([h]) => h)).toContain("_policy")
  })

  it("a checkpoint removed from the middle of the chain -> checkpoints (the next one's prev no longer matches)", async () => {
    const r = await replayCopy(await copyRaw(original, (ms) => ms.filter((m) => m.seq !== checkpoints[0]!.seq)))
    expect(failedChecks(r)).toContain("checkpoints")
    expect(checkpointMessages(r)).toContainEqual(["_checkpoint", expect.stringMatching(/is the first but names a previous one|prev does not match/)])
  })

  it("the newest checkpoint removed with everything after the one before: unseen from the stream alone, caught against the kept checkpoint", async () => {
    const cut = (ms: Array<Raw>) => ms.filter((m) => m.seq <= checkpoints[0]!.seq)
    const alone = await replayCopy(await copyRaw(original, cut))
    expect(checkOf(alone, "checkpoints").status).toBe("passed")
    const kept = await replayCopy(await copyRaw(original, cut), { keptCheckpoint: checkpoints[1]!.data })
    expect(failedChecks(kept)).toContain("checkpoints")
    expect(checkpointMessages(kept)).toContainEqual(["_checkpoint", expect.stringMatching(/checkpoints end at seq \d+: checkpoints were removed with what they covered/)])
  })

  it("a checkpoint forged to match a rebuilt history, signed with the forger's own key -> checkpoints (not a trust-root kernel key)", async () => {
    generateKernelKey(join(dir, "forger.key"))
    const forger = Either.getOrThrow(readKernelKey(join(dir, "forger.key")))
    const victim = calls[0]!
    const r = await replayCopy(
      await copyRaw(original, (ms) =>
        ms
          .filter((m) => m.subject !== on(victim))
          .map((m) => {
            if (m.seq !== checkpoints[0]!.seq) return m
            const c = checkpoints[0]!.checkpoint
            const forged: Checkpoint = signCheckpoint({ prev: c.prev, from_seq: c.from_seq, last_seq: c.last_seq, heads: c.heads.filter((h) => h[0] !== victim), at: c.at }, forger)
            return { ...m, data: encodeCheckpoint(forged) }
          })
      )
    )
    expect(failedChecks(r)).toContain("checkpoints")
    expect(checkpointMessages(r)).toContainEqual(["_checkpoint", expect.stringMatching(/signed by a key the trust root does not list/)])
  })

  it("a history rebuilt later is stored at rebuild time: store-time names every commit stored long after its events' time", async () => {
    const newestAt = Math.max(...original.filter((m) => m.subject.startsWith("wk.v1.events.h_")).map((m) => Date.parse((JSON.parse(new TextDecoder().decode(m.data)) as { events: Array<{ at: string }> }).events.at(-1)!.at)))
    await eventually(async () => Date.now() - newestAt > 1200)
    const honest = await replayAs(nats.servers, "auditor", { factsBucket: null, sessionsStream: null, storeSkewMs: 1000, selection: { held: calls[0]! } })
    expect(checkOf(honest, "store-time")).toMatchObject({ status: "passed" })
    const r = await replayCopy(await copyRaw(original), { storeSkewMs: 1000 })
    expect(failedChecks(r)).toContain("store-time")
    expect(checkOf(r, "store-time").violations[0]!.message).toMatch(/was stored \d+ s after its events' time: the commit was written again later/)
  })

  it("a kernel with a key and WK_CHECKPOINT_INTERVAL_MS checkpoints on its own, continuing the chain", async () => {
    process.env["WK_CHECKPOINT_INTERVAL_MS"] = "100"
    const second = await startKernel(nats.servers, [profile])
    try {
      const held = await allowed(5)
      const mine = async () => (await readRaw(kernelConn)).filter((m) => m.subject === on(held)).map((m) => m.seq)
      await eventually(async () => (await mine()).length > 0)
      const lastOfCall = Math.max(...(await mine()))
      await eventually(async () => {
        const c = await Effect.runPromise(latestCheckpoint.pipe(Effect.provide(layerNats({ servers: nats.servers, ...Roles.auditor, name: "test auditor" }))))
        return c !== null && c.checkpoint.last_seq >= lastOfCall
      })
      const r = await replayAs(nats.servers, "auditor", { factsBucket: null, sessionsStream: null, trust: trusted() })
      expect(checkOf(r, "checkpoints").status).toBe("passed")
      expect(checkOf(r, "checkpoints").checked).toBeGreaterThanOrEqual(3)
    } finally {
      process.env["WK_CHECKPOINT_INTERVAL_MS"] = "0"
      await second.stop()
    }
    void carol
  })

  it("wk audit checkpoint saves the newest checkpoint (auditor user), --key signs a new one first (kernel user), and wk audit replay --checkpoint accepts it", async () => {
    const saved = join(dir, "ckpt.json")
    const got = await wk(["audit", "checkpoint", "--out", saved])
    expect(got.code).toBe(0)
    expect(got.stderr).toMatch(/checkpoint seq \d+: covers \d+\.\.\d+, \d+ head\(s\), signed by /)
    calls.push(await allowed(6))
    const fresh = join(dir, "ckpt-fresh.json")
    const signed = await wk(["audit", "checkpoint", "--key", join(dir, "kernel.key"), "--out", fresh])
    expect(signed.code).toBe(0)
    const freshRecord = JSON.parse(readFileSync(fresh, "utf8")) as Checkpoint
    expect(freshRecord.heads.map((h) => h[0])).toContain(calls[calls.length - 1])
    const trustFile = join(dir, "trust.json")
    writeFileSync(trustFile, JSON.stringify(trusted()))
    const ok = await wk(["audit", "replay", "--trust", trustFile, "--checkpoint", fresh, "--no-projection", "--quiet"])
    expect(ok.stdout).toMatch(/checkpoints/)
    expect(ok.code).toBe(0)
    const rotated = await wk(["audit", "key", "--out", join(dir, "next.key"), "--rotate-from", join(dir, "kernel.key")])
    expect(rotated.code).toBe(0)
    expect(rotated.stderr).toMatch(/rotation recorded at seq \d+: .+ -> .+; restart the kernels with WK_KERNEL_KEY=/)
    expect(rotated.stdout.trim()).toBe(Either.getOrThrow(readKernelKey(join(dir, "next.key"))).publicKey)
    writeFileSync(join(dir, "bogus.json"), "{}")
    const bad = await wk(["audit", "replay", "--checkpoint", join(dir, "bogus.json"), "--quiet"])
    expect(bad.code).not.toBe(0)
    expect(bad.stderr + bad.stdout).toMatch(/--checkpoint .*bogus\.json: not a checkpoint/)
  }, 180_000)

  // Last: it tampers with the real stream the tests above replay.
  it("a call purged from the real stream with the retention login before any checkpoint covered it: the kernel's next checkpoint names its commits, and the replay fails", async () => {
    const victim = await allowed(40)
    const mine = (await readRaw(kernelConn)).filter((m) => m.subject === on(victim))
    expect(mine.length).toBeGreaterThan(0)
    // The kernel's NATS user may not purge (test/audit/StreamGuard.test.ts); the retention login may.
    const retention = await connectAs(nats.servers, "retention")
    conns.push(retention)
    const purged = await (await jetstreamManager(retention)).streams.purge(Streams.events, { filter: on(victim) })
    expect(purged.purged).toBe(mine.length)
    const c = (await checkpointNow())!
    expect(c.checkpoint.missing?.map((h) => [h[0], h[1]])).toEqual(mine.map((m) => [victim, m.seq]))
    const r = await replayAs(nats.servers, "auditor", { factsBucket: null, sessionsStream: null, trust: trusted() })
    expect(failedChecks(r)).toContain("checkpoints")
    expect(checkpointMessages(r)).toContainEqual([victim, expect.stringMatching(/found it gone from the stream or changed: it was removed or rewritten/)])
    checkpoints.push(c)
  })
})
