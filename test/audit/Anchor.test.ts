import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DeliverPolicy, jetstream, jetstreamManager, StorageType } from "@nats-io/jetstream"
import { Effect, Either } from "effect"
import { exportOver } from "../../runtime/audit/Export.js"
import { verifyExport } from "../../runtime/audit/VerifyExport.js"
import { jcsDigest } from "../../runtime/schema/Canonical.js"
import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { generateKernelKey, readKernelKey, type KernelKey } from "../../runtime/ledger/KernelKey.js"
import { pullAnchor } from "../../runtime/audit/AnchorPull.js"
import { readAnchor } from "../../runtime/ledger/CheckpointAnchor.js"
import { decodeCheckpoint } from "../../runtime/schema/Checkpoint.js"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { Streams } from "../../runtime/schema/Subjects.js"
import { Roles, startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventually } from "../support/Stream.js"
import { checkOf, replayAs, trustRootFor } from "./support.js"

// Checkpoints anchored outside NATS by default: the kernel appends each checkpoint it stores to
// its anchor file; the auditor pulls it into a copy of its own and replays with it. A rebuild
// that drops the stream's tail with the newest checkpoints (the kernel's NATS login can write
// WK_EVENTS) passes the stream's own checkpoints, and fails against the anchor.

let nats: TestNats
let kernel: InProcessKernel
let conns: Array<NatsConnection> = []
let kernelConn: NatsConnection
let key: KernelKey
let dir: string
let anchorFile: string
const profile = testProfile()
const calls: Array<string> = []
let heldId: string
interface Raw {
  seq: number
  subject: string
  data: Uint8Array
}
let original: Array<Raw>

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
/** The stream written again, one message at a time, with only the messages `keep` keeps (sequences renumber from 1). */
const copyRaw = async (keep: (m: Raw) => boolean): Promise<string> => {
  const name = `WK_ANCHOR_COPY${++copies}`
  const prefix = `anchor${copies}.`
  await (await jetstreamManager(kernelConn)).streams.add({ name, subjects: [`${prefix}wk.v1.events.>`], storage: StorageType.Memory })
  const js = jetstream(kernelConn)
  for (const m of original.filter(keep)) await js.publish(`${prefix}${m.subject}`, m.data)
  return name
}
const trusted = () => ({ ...trustRootFor([profile]), kernel_keys: [key.publicKey] })
const anchoredUpTo = () => Math.max(0, ...readAnchor(anchorFile).map((c) => Either.getOrThrow(decodeCheckpoint(c.data)).last_seq))

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

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "wk-anchor-"))
  generateKernelKey(join(dir, "kernel.key"))
  key = Either.getOrThrow(readKernelKey(join(dir, "kernel.key")))
  anchorFile = join(dir, "anchor", "checkpoints.jsonl")
  process.env["WK_KERNEL_KEY"] = join(dir, "kernel.key")
  process.env["WK_CHECKPOINT_INTERVAL_MS"] = "200"
  process.env["WK_ANCHOR_FILE"] = anchorFile
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [profile])
  const [tool, agent, k, witness] = await Promise.all([connectAs(nats.servers, "bank"), connectAs(nats.servers, "agent"), connectAs(nats.servers, "kernel"), connectAs(nats.servers, "witness")])
  conns = [tool, agent, k, witness]
  kernelConn = k
  new DemoBank().serve(tool)
  const alice = clientFor(agent, "agent:alice")
  for (let n = 1; n <= 3; n++) {
    const r = (await alice.propose({ session_id: "s-anchor", turn_id: `t${n}`, call_id: `c${n}`, tool: "money_transfer", args: { from: "a", to: "shop", amount: 10 + n } } as never)) as { status: number; held_id: string }
    expect(r.status).toBe(200)
    calls.push(r.held_id)
  }
  // A held call, approved and delivered: its delivery in WK_SESSIONS is signed and chained.
  const held = (await alice.propose({ session_id: "s-anchor", turn_id: "t9", call_id: "c9", tool: "money_transfer", args: { from: "a", to: "shop", amount: 5000 } } as never)) as { status: number; held_id: string; generation: number; call_digest: string; witness_request: { contract_digest: string } }
  expect(held.status).toBe(202)
  heldId = held.held_id
  const approval = await clientFor(witness, "user:carol").attest({ held_id: held.held_id, generation: held.generation, call_digest: held.call_digest, contract_digest: held.witness_request.contract_digest, class: "human", decision: "approve" })
  expect(approval.disposition).toBe("accepted")
  await eventually(async () => ((await alice.get(held.held_id)).held as Record<string, unknown>)["continuation_delivery"] === "delivered", 20_000)
  // Every call commit is covered by an anchored checkpoint.
  const lastCall = Math.max(...(await readRaw(kernelConn)).filter((m) => !m.subject.endsWith("._checkpoint")).map((m) => m.seq))
  await eventually(async () => anchoredUpTo() >= lastCall, 20_000)
  await kernel.stop()
  original = await readRaw(kernelConn)
}, 60_000)

afterAll(async () => {
  delete process.env["WK_KERNEL_KEY"]
  delete process.env["WK_CHECKPOINT_INTERVAL_MS"]
  delete process.env["WK_ANCHOR_FILE"]
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
  rmSync(dir, { recursive: true, force: true })
})

describe("checkpoints anchored outside the stream", () => {
  it("the kernel appends every checkpoint it stores to its anchor; the true history passes against the pulled copy", async () => {
    const stored = original.filter((m) => m.subject.endsWith("._checkpoint"))
    const anchored = readAnchor(anchorFile)
    expect(anchored.map((c) => c.seq)).toEqual(stored.map((m) => m.seq))
    expect(anchored.map((c) => Buffer.from(c.data).toString())).toEqual(stored.map((m) => Buffer.from(m.data).toString()))
    const kept = join(dir, "pulled.jsonl")
    expect(pullAnchor(anchorFile, kept)).toMatchObject({ added: anchored.length, total: anchored.length })
    expect(pullAnchor(anchorFile, kept)).toMatchObject({ added: 0 })
    const r = await replayAs(nats.servers, "kernel", { stream: await copyRaw(() => true), factsBucket: null, sessionsStream: null, trust: trusted(), anchored: readAnchor(kept).map((c) => c.data) })
    expect(checkOf(r, "checkpoints")).toMatchObject({ status: "passed", violations: [] })
    expect(r.ok).toBe(true)
  })

  it("the stream's tail dropped with its newest checkpoints: passes the stream's own checkpoints, fails against the anchor", async () => {
    // Cut before the last call: its commits and every checkpoint stored after go.
    const cut = Math.min(...original.filter((m) => m.subject.endsWith(calls[2]!)).map((m) => m.seq)) - 1
    const truncated = await copyRaw((m) => m.seq <= cut)
    const unanchored = await replayAs(nats.servers, "kernel", { stream: truncated, factsBucket: null, sessionsStream: null, trust: trusted() })
    expect(checkOf(unanchored, "checkpoints").violations).toEqual([])
    const anchored = await replayAs(nats.servers, "kernel", { stream: truncated, factsBucket: null, sessionsStream: null, trust: trusted(), anchored: readAnchor(anchorFile).map((c) => c.data) })
    expect(checkOf(anchored, "checkpoints").status).toBe("failed")
    expect(checkOf(anchored, "checkpoints").violations.map((v) => v.message)).toContainEqual(expect.stringMatching(/covers up to seq \d+, but the stream's checkpoints end at seq \d+: checkpoints were removed with what they covered/))
    expect(anchored.ok).toBe(false)
  })

  it("a pull refuses an anchor whose earlier lines were rewritten or removed, and adds nothing", async () => {
    const kept = join(dir, "pulled-once.jsonl")
    pullAnchor(anchorFile, kept)
    const before = readFileSync(kept, "utf8")
    const lines = readFileSync(anchorFile, "utf8").split("\n").filter((l) => l !== "")
    const rewritten = join(dir, "rewritten.jsonl")
    writeFileSync(rewritten, [lines[0]!.replace(/"at":"[^"]*"/, `"at":"2020-01-01T00:00:00.000Z"`), ...lines.slice(1)].map((l) => `${l}\n`).join(""))
    expect(() => pullAnchor(rewritten, kept)).toThrow(/line 1 of .* differs from the one pulled before .*: the anchor was rewritten/)
    const shortened = join(dir, "shortened.jsonl")
    writeFileSync(shortened, "")
    expect(() => pullAnchor(shortened, kept)).toThrow(/lines were removed from the anchor/)
    expect(readFileSync(kept, "utf8")).toBe(before)
  })

  it("wk audit replay: without a trust root and an anchor its last line is UNVERIFIED and it exits 1; with both it exits 0; --no-trust is for development", async () => {
    const trustFile = join(dir, "trust.json")
    writeFileSync(trustFile, JSON.stringify(trusted()))
    const kept = join(dir, "pulled-cli.jsonl")
    const pulled = await wk(["audit", "anchor", "pull", "--from", anchorFile, "--out", kept])
    expect(pulled.code).toBe(0)
    expect(pulled.stdout).toMatch(/\d+ checkpoint\(s\) pulled into .*pulled-cli\.jsonl/)
    expect(existsSync(kept)).toBe(true)
    const bare = await wk(["audit", "replay", "--no-projection", "--no-rerun", "--quiet"])
    expect(bare.code).toBe(1)
    expect(bare.stdout.trim().split("\n").at(-1)).toMatch(/^UNVERIFIED: no trust root \(--trust\); no anchor \(--anchor\)/)
    const verified = await wk(["audit", "replay", "--trust", trustFile, "--anchor", kept, "--no-projection", "--no-rerun", "--quiet"])
    expect(verified.stdout).not.toMatch(/UNVERIFIED/)
    expect(verified.stdout.trim().split("\n").at(-1)).toBe("OK: no violations")
    expect(verified.code).toBe(0)
    const dev = await wk(["audit", "replay", "--no-trust", "--no-projection", "--no-rerun", "--quiet"])
    expect(dev.stdout).not.toMatch(/UNVERIFIED/)
    expect(dev.code).toBe(0)
  }, 180_000)
})

/** The delivery messages of the held call in WK_SESSIONS. */
const deliveriesOf = async (): Promise<Array<Record<string, unknown>>> => {
  const jsm = await jetstreamManager(kernelConn)
  const out: Array<Record<string, unknown>> = []
  for (let seq = 1; ; ) {
    const m = await jsm.direct.getMessage(Streams.sessions, { next_by_subj: "wk.v1.sessions.s-anchor.results", seq })
    if (m === null) return out.filter((d) => d["held_id"] === heldId)
    out.push(m.json<Record<string, unknown>>())
    seq = m.seq + 1
  }
}

describe("deliveries signed and chained like commits", () => {
  it("the kernel signs each delivery and names the commit it delivered from; the replay checks both against the trust root", async () => {
    const [d] = await deliveriesOf()
    expect(d).toMatchObject({ held_id: heldId, key: key.publicKey, prev: expect.stringMatching(/^[0-9a-f]{64}$/), prev_seq: expect.any(Number), sig: expect.any(String) })
    const r = await replayAs(nats.servers, "auditor", { factsBucket: null, trust: trusted() })
    expect(checkOf(r, "delivery")).toMatchObject({ status: "passed", violations: [] })
  })

  it("an export carries the checkpoints naming its call and verifies offline; with its last commit left out (events and digest redone) it fails checkpoints", async () => {
    const doc = await Effect.runPromise(exportOver({ servers: nats.servers, ...Roles.auditor }, { held: heldId }))
    expect(doc.checkpoints?.length).toBeGreaterThan(0)
    expect(verifyExport(JSON.parse(JSON.stringify(doc)), trusted())).toMatchObject({ ok: true, problems: [] })
    const last = Math.max(...doc.commits!.map((c) => c.seq))
    const events = doc.events.filter((e) => e.seq !== last)
    const cut = { ...doc, commits: doc.commits!.filter((c) => c.seq !== last), events, events_digest: jcsDigest(events) }
    const v = verifyExport(JSON.parse(JSON.stringify(cut)), trusted())
    expect(v.ok).toBe(false)
    expect(v.problems).toContainEqual(expect.stringMatching(new RegExp(`^checkpoints: checkpoint seq \\d+ names ${heldId}'s commit at seq ${last}, which the export does not hold: commits were left out`)))
  })

  // Last: it writes into the real WK_SESSIONS.
  it("a delivery written into WK_SESSIONS with the kernel's NATS login, unsigned or changed after signing -> delivery", async () => {
    const [real] = await deliveriesOf()
    const { key: _k, sig: _s, prev: _p, prev_seq: _q, ...unsigned } = real!
    const changed = { ...real!, result: { forged: true } }
    const js = jetstream(kernelConn)
    await js.publish("wk.v1.sessions.s-anchor.results", new TextEncoder().encode(JSON.stringify(unsigned)))
    await js.publish("wk.v1.sessions.s-anchor.results", new TextEncoder().encode(JSON.stringify(changed)))
    const r = await replayAs(nats.servers, "auditor", { factsBucket: null, trust: trusted() })
    const messages = checkOf(r, "delivery").violations.map((v) => v.message)
    expect(messages).toContainEqual(expect.stringMatching(/^delivery .* is not signed by the kernel/))
    expect(messages).toContainEqual(expect.stringMatching(/^delivery .* carries a signature that does not verify/))
  })
})
