import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { execFile } from "node:child_process"
import { gunzipSync } from "node:zlib"
import { promisify } from "node:util"
import { join } from "node:path"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { jetstreamManager } from "@nats-io/jetstream"
import { Objm } from "@nats-io/obj"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { DefaultRetention } from "../../runtime/ledger/Retention.js"
import { ArchiveBucket, ArchiveRecord, archiveRecordSigned, ArchiveSubject, decodeArchiveLines } from "../../runtime/schema/Archive.js"
import { sha256Hex } from "../../runtime/schema/Canonical.js"
import { Streams } from "../../runtime/schema/Subjects.js"
import type { AuditReport } from "../../runtime/audit/AuditReport.js"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { Effect, Either } from "effect"
import { exportOver } from "../../runtime/audit/Export.js"
import { verifyExport } from "../../runtime/audit/VerifyExport.js"
import { startTestNats, Roles, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { headAtWith } from "../../runtime/ledger/EventLog.js"
import { layerNats, Nats } from "../../runtime/ledger/Nats.js"
import { commitDigest } from "../../runtime/schema/Commit.js"
import { eventsOf, eventually } from "../support/Stream.js"
import { checkOf, replayAs, trustRootFor } from "../audit/support.js"
import nacl from "tweetnacl"
import { generateKernelKey, readKernelKey, type KernelKey } from "../../runtime/ledger/KernelKey.js"

// Retention that keeps the audit: an ended call older than the archive age leaves WK_EVENTS for a
// gzip archive in the object store whose SHA-256 is recorded in WK_EVENTS; `wk audit replay`
// re-derives the call from the archive and reports an archive whose bytes changed, by name.
let nats: TestNats
let kernel: InProcessKernel
let bank: DemoBank
let agentConn: NatsConnection
let witnessConn: NatsConnection
let toolConn: NatsConnection
let kernelConn: NatsConnection
let alice: WitnessClient
let carol: WitnessClient

const retention = { ...DefaultRetention, archiveAfterMs: 300, archiveIntervalMs: 200, archiveBatch: 50, eventsMaxBytes: 64 * 1024 * 1024, sessionsMaxAgeMs: 60 * 60 * 1000, login: Roles.retention }

let n = 0
const transfer = (amount: number) =>
  alice.propose({ session_id: "s-retention", turn_id: "t1", call_id: `rt${++n}`, tool: "money_transfer", args: { from: `rt-${n}`, to: "shop", amount } }) as Promise<{
    status: number
    held_id: string
    call_digest: string
    generation: number
    witness_request: { contract_digest: string }
  }>

/** Every archive record in WK_EVENTS. */
const archiveRecords = async (): Promise<Array<ArchiveRecord>> => {
  const jsm = await jetstreamManager(kernelConn)
  const out: Array<ArchiveRecord> = []
  let seq = 1
  for (;;) {
    const m = await jsm.direct.getMessage(Streams.events, { next_by_subj: ArchiveSubject, seq })
    if (m === null) return out
    out.push(m.json<ArchiveRecord>())
    seq = m.seq + 1
  }
}
const recordOf = async (heldId: string) => (await archiveRecords()).find((r) => r.calls.some((c) => c.held_id === heldId))

let keyDir: string
let key: KernelKey

beforeAll(async () => {
  // A kernel with a signing key: its archive records, which authorize the purges, are signed.
  keyDir = mkdtempSync(join(tmpdir(), "wk-retention-key-"))
  generateKernelKey(join(keyDir, "kernel.key"))
  key = Either.getOrThrow(readKernelKey(join(keyDir, "kernel.key")))
  process.env["WK_KERNEL_KEY"] = join(keyDir, "kernel.key")
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [testProfile()], { config: { retention } })
  toolConn = await connectAs(nats.servers, "bank")
  bank = new DemoBank().serve(toolConn)
  agentConn = await connectAs(nats.servers, "agent")
  witnessConn = await connectAs(nats.servers, "witness")
  kernelConn = await connectAs(nats.servers, "kernel")
  alice = clientFor(agentConn, "agent:alice")
  carol = clientFor(witnessConn, "user:carol")
})

afterAll(async () => {
  delete process.env["WK_KERNEL_KEY"]
  await kernel?.stop()
  await Promise.all([agentConn, witnessConn, toolConn, kernelConn].map((c) => c?.close()))
  await nats?.dispose()
}, 60_000)

describe("retention", () => {
  it("the streams carry the configured limits", async () => {
    const jsm = await jetstreamManager(kernelConn)
    const events = (await jsm.streams.info(Streams.events)).config
    const sessions = (await jsm.streams.info(Streams.sessions)).config
    expect(events).toMatchObject({ max_bytes: retention.eventsMaxBytes, max_age: 0, discard: "new" })
    expect(sessions).toMatchObject({ max_bytes: retention.sessionsMaxBytes, max_age: retention.sessionsMaxAgeMs * 1_000_000, discard: "old" })
  })

  let held: string
  let allowed: string
  let open: string

  it("a completed call is archived, leaves the hot stream, and the audit re-derives it from the archive", async () => {
    // One witnessed call (acknowledged delivery), one allowed at once, one left open.
    const h = await transfer(2_500)
    expect(h.status).toBe(202)
    held = h.held_id
    expect((await carol.attest({ held_id: h.held_id, class: "human", decision: "approve", generation: h.generation, call_digest: h.call_digest, contract_digest: h.witness_request.contract_digest })).status).toBe(202)
    expect((await alice.result(h.held_id, { sessionId: "s-retention", timeoutMs: 30_000 })).outcome).toBe("completed")
    const a = await transfer(50)
    expect(a.status).toBe(200)
    allowed = a.held_id
    const o = await transfer(3_000)
    expect(o.status).toBe(202)
    open = o.held_id
    const before = await eventsOf(kernelConn, held)
    expect(before.some((e) => e.type === "delivery.acknowledged")).toBe(true)

    const record = await eventually(() => recordOf(held), 30_000)
    await eventually(() => recordOf(allowed), 30_000)
    expect(await eventsOf(kernelConn, held)).toEqual([])
    expect(await eventsOf(kernelConn, allowed)).toEqual([])
    // The open call is never archived.
    expect((await eventsOf(kernelConn, open)).length).toBeGreaterThan(0)
    expect((await archiveRecords()).some((r) => r.calls.some((c) => c.held_id === open))).toBe(false)

    // The archive holds the call's commits byte for byte, under the recorded digest.
    const bytes = await (await new Objm(kernelConn).open(ArchiveBucket)).getBlob(record.object)
    expect(sha256Hex(bytes!)).toBe(record.sha256)
    const lines = decodeArchiveLines(gunzipSync(bytes!)).filter((l) => l.subject.endsWith(held))
    expect(lines.map((l) => l.seq)).toEqual([...new Set(before.map((e) => e.seq))])
    expect(lines.flatMap((l) => (JSON.parse(new TextDecoder().decode(l.commit)) as { events: Array<unknown> }).events)).toEqual(before.map(({ seq: _seq, index: _index, ...e }) => e))

    // The call still reads as it ended.
    expect((await alice.get(held)).held).toMatchObject({ lifecycle: "completed", continuation_delivery: "acknowledged" })

    const report = await replayAs(nats.servers, "auditor")
    expect(report.checks.filter((c) => c.status === "failed")).toEqual([])
    expect(report.ok).toBe(true)
    expect(checkOf(report, "archive")).toMatchObject({ status: "passed" })
    expect(report.archived).toBeGreaterThanOrEqual(new Set(before.map((e) => e.seq)).size)
    expect(checkOf(report, "effect-safety").status).toBe("passed")
    expect(report.projection).toMatchObject({ mismatched: 0, missing: 0 })

    const one = await replayAs(nats.servers, "auditor", { selection: { held } })
    expect(one).toMatchObject({ ok: true, held_calls: 1, archived: new Set(before.map((e) => e.seq)).size })

    // The export of an archived call carries its events from the archive, and verifies.
    const doc = await Effect.runPromise(exportOver({ servers: nats.servers, ...Roles.auditor }, { held }))
    expect(doc.events.map((e) => [e.seq, e.index])).toEqual(before.map((e) => [e.seq, e.index]))
    expect(verifyExport(doc).ok).toBe(true)
  }, 90_000)

  it("the archive record that authorized the purge is signed with the kernel's key; under a root whose kernel key is another, the purge is not authorized -> archive", async () => {
    const record = (await recordOf(held))!
    expect(record.key).toBe(key.publicKey)
    expect(archiveRecordSigned(record)).toBe(true)
    const root = trustRootFor([testProfile()])
    const ours = await replayAs(nats.servers, "auditor", { factsBucket: null, sessionsStream: null, trust: { ...root, kernel_keys: [key.publicKey] } })
    expect(checkOf(ours, "archive")).toMatchObject({ status: "passed", violations: [] })
    const other = Buffer.from(nacl.sign.keyPair().publicKey).toString("base64")
    const theirs = await replayAs(nats.servers, "auditor", { factsBucket: null, sessionsStream: null, trust: { ...root, kernel_keys: [other] } })
    expect(checkOf(theirs, "archive").violations.map((v) => v.message)).toContainEqual(expect.stringMatching(/^archive record seq \d+ is signed by a key the trust root does not list as a kernel key: the purge it names is not authorized/))
  })

  it("a commit appended after archiving names its archived predecessor: the head of a purged call is read from its archive", async () => {
    const record = (await recordOf(held))!
    const bytes = await (await new Objm(kernelConn).open(ArchiveBucket)).getBlob(record.object)
    const lines = decodeArchiveLines(gunzipSync(bytes!)).filter((l) => l.subject.endsWith(held))
    const last = lines[lines.length - 1]!
    expect(await eventsOf(kernelConn, held)).toEqual([])
    const head = await Effect.runPromise(Effect.flatMap(Nats, (n) => headAtWith(n, held, last.seq)).pipe(Effect.provide(layerNats({ servers: nats.servers, ...Roles.kernel }))))
    expect(head).toBe(commitDigest(last.commit))
  })

  it("wk audit replay verifies the archived call; an archive whose bytes changed is reported by name", async () => {
    const run = promisify(execFile)
    const replayCli = async () => {
      try {
        return JSON.parse((await run(process.execPath, [join(repoRoot, "runtime", "cli", "wk.mjs"), "audit", "replay", "--json", "--no-trust", "--quiet"], { env: { ...process.env, NATS_URL: `nats://${nats.servers}`, WK_CONFIG_DIR: mkdtempSync(join(tmpdir(), "wk-config-")) }, timeout: 60_000 })).stdout) as AuditReport
      } catch (e) {
        return JSON.parse((e as { stdout: string }).stdout) as AuditReport
      }
    }
    const clean = await replayCli()
    expect(clean.ok).toBe(true)
    expect(clean.archived).toBeGreaterThan(0)

    // Someone with write access to the object store changes one byte of the archive.
    const record = (await recordOf(held))!
    const os = await new Objm(kernelConn).open(ArchiveBucket)
    const bytes = (await os.getBlob(record.object))!
    const tampered = Uint8Array.from(bytes)
    tampered[tampered.length - 10] = tampered[tampered.length - 10]! ^ 0xff
    await os.putBlob({ name: record.object }, tampered)

    const report = await replayCli()
    expect(report.ok).toBe(false)
    const archive = report.checks.find((c) => c.name === "archive")!
    expect(archive.status).toBe("failed")
    const named = archive.violations.filter((v) => v.held_id === held)
    expect(named.length).toBe(1)
    expect(named[0]!.message).toContain(record.object)
    expect(named[0]!.message).toContain(record.sha256)
  }, 120_000)
})
