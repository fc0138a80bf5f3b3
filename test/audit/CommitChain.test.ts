import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DeliverPolicy, jetstream, jetstreamManager, StorageType } from "@nats-io/jetstream"
import { Effect, Either } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { generateKernelKey, readKernelKey, type KernelKey } from "../../runtime/ledger/KernelKey.js"
import { commitDigest, type Commit } from "../../runtime/schema/Commit.js"
import { Streams } from "../../runtime/schema/Subjects.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventually } from "../support/Stream.js"
import { checkOf, failedChecks, replayAs, trustRootFor } from "./support.js"
import { exportOver } from "../../runtime/audit/Export.js"
import { verifyExport } from "../../runtime/audit/VerifyExport.js"
import { jcsDigest } from "../../runtime/schema/Canonical.js"
import { Roles } from "../support/TestNats.js"

// A kernel that signs its commits (WK_KERNEL_KEY), a real history, and copies of the stream
// rewritten commit by commit with the kernel's NATS credentials but without its key: the
// chain catches removal, insertion and reordering inside a call's history, and the trust
// root's kernel key catches a commit rewritten with its chain recomputed.

let nats: TestNats
let kernel: InProcessKernel
let conns: Array<NatsConnection> = []
let kernelConn: NatsConnection
let key: KernelKey
let dir: string
const profile = testProfile()
let approved: string

/** One stored message, bytes as they are. */
interface Raw {
  subject: string
  data: Uint8Array
}

const readRaw = async (nc: NatsConnection): Promise<Array<Raw>> => {
  const info = await (await jetstreamManager(nc)).streams.info(Streams.events)
  const consumer = await jetstream(nc).consumers.get(Streams.events, { deliver_policy: DeliverPolicy.All })
  const messages = await consumer.consume({ max_messages: 1000 })
  const out: Array<Raw> = []
  for await (const m of messages) {
    out.push({ subject: m.subject, data: m.data })
    if (m.info.pending === 0 || m.seq >= info.state.last_seq) break
  }
  await messages.close()
  return out
}

let copies = 0
/** The stream written again as a forger would, one message per commit, after `edit`; returns its name. */
const copyRaw = async (messages: ReadonlyArray<Raw>, edit: (ms: Array<Raw>) => Array<Raw> = (ms) => ms): Promise<string> => {
  const n = ++copies
  const name = `WK_CHAIN_COPY${n}`
  const prefix = `chain${n}.`
  await (await jetstreamManager(kernelConn)).streams.add({ name, subjects: [`${prefix}wk.v1.events.>`], storage: StorageType.Memory })
  const js = jetstream(kernelConn)
  for (const m of edit(messages.map((x) => ({ ...x })))) await js.publish(`${prefix}${m.subject}`, m.data)
  return name
}

const on = (id: string) => `wk.v1.events.${id}`
const decode = (m: Raw): Commit => JSON.parse(new TextDecoder().decode(m.data)) as Commit
const encode = (c: Commit): Uint8Array => new TextEncoder().encode(JSON.stringify(c))

/** Replaces the call's commits (in place, in order) with `rewrite` of them. */
const rewriteCall = (id: string, rewrite: (mine: Array<Raw>) => Array<Raw>) => (ms: Array<Raw>): Array<Raw> => {
  const mine = ms.filter((m) => m.subject === on(id))
  const others = ms.filter((m) => m.subject !== on(id))
  return [...others, ...rewrite(mine)]
}

/** The commits with `prev` recomputed from their bytes as they now stand (what a forger without the key can do). */
const rechain = (mine: Array<Raw>, strip: boolean): Array<Raw> => {
  const out: Array<Raw> = []
  for (const m of mine) {
    const { key: _k, sig: _s, ...bare } = decode(m)
    const c = strip ? bare : decode(m)
    out.push({ subject: m.subject, data: encode({ ...c, prev: out.length === 0 ? "" : commitDigest(out[out.length - 1]!.data) }) })
  }
  return out
}

const trusted = () => ({ ...trustRootFor([profile]), kernel_keys: [key.publicKey] })
const replayCopy = (stream: string, trust = false) => replayAs(nats.servers, "kernel", { stream, factsBucket: null, ...(trust ? { trust: trusted() } : {}) })
const chainMessages = (r: Awaited<ReturnType<typeof replayCopy>>) => checkOf(r, "commit-chain").violations.map((v) => [v.held_id, v.message])

let original: Array<Raw>

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "wk-chain-audit-"))
  generateKernelKey(join(dir, "kernel.key"))
  key = Either.getOrThrow(readKernelKey(join(dir, "kernel.key")))
  process.env["WK_KERNEL_KEY"] = join(dir, "kernel.key")
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [profile])
  const [tool, agent, witness, k] = await Promise.all([connectAs(nats.servers, "bank"), connectAs(nats.servers, "agent"), connectAs(nats.servers, "witness"), connectAs(nats.servers, "kernel")])
  conns = [tool, agent, witness, k]
  kernelConn = k
  new DemoBank().serve(tool)
  const alice = clientFor(agent, "agent:alice")
  const carol = clientFor(witness, "user:carol")
  const allowed = (await alice.propose({ session_id: "s-chain", turn_id: "t1", call_id: "c1", tool: "money_transfer", args: { from: "a", to: "shop", amount: 50 } } as never)) as { status: number }
  expect(allowed.status).toBe(200)
  const held = (await alice.propose({ session_id: "s-chain", turn_id: "t1", call_id: "c2", tool: "money_transfer", args: { from: "a", to: "shop", amount: 5000 } } as never)) as {
    status: number
    held_id: string
    call_digest: string
    generation: number
    witness_request: { contract_digest: string }
  }
  expect(held.status).toBe(202)
  approved = held.held_id
  const binding = { held_id: held.held_id, generation: held.generation, call_digest: held.call_digest, contract_digest: held.witness_request.contract_digest }
  expect((await carol.attest({ ...binding, class: "human", decision: "approve" })).disposition).toBe("accepted")
  expect(await alice.result(approved)).toMatchObject({ outcome: "completed", admission: "admitted" })
  await eventually(async () => {
    const all = await readRaw(kernelConn)
    return ["delivered", "acknowledged"].some((s) => all.some((m) => m.subject === on(approved) && new TextDecoder().decode(m.data).includes(`"delivery.${s === "delivered" ? "published" : "acknowledged"}"`)))
  })
  original = await readRaw(kernelConn)
  expect(original.filter((m) => m.subject === on(approved)).length).toBeGreaterThanOrEqual(3)
}, 60_000)

afterAll(async () => {
  delete process.env["WK_KERNEL_KEY"]
  await kernel?.stop()
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
  rmSync(dir, { recursive: true, force: true })
})

describe("signed, chained commits", () => {
  it("the kernel's history is chained and signed; it passes with the trust root's kernel key, and without a root the replay says signatures are unanchored", async () => {
    const commits = original.filter((m) => m.subject.startsWith("wk.v1.events.h_")).map(decode)
    expect(commits.every((c) => typeof c.prev === "string" && c.key === key.publicKey && typeof c.sig === "string")).toBe(true)
    const stream = await copyRaw(original)
    const anchored = await replayCopy(stream, true)
    expect(failedChecks(anchored)).toEqual([])
    expect(checkOf(anchored, "commit-chain")).toMatchObject({ status: "passed", checked: commits.length })
    const bare = await replayCopy(stream)
    expect(failedChecks(bare)).toEqual([])
    expect(checkOf(bare, "commit-chain").note).toMatch(/signed commit\(s\) unanchored.*pass --trust/)
  })

  it("a commit deleted from a call's history and the rest re-appended -> commit-chain", async () => {
    const r = await replayCopy(await copyRaw(original, rewriteCall(approved, (mine) => mine.filter((_, i) => i !== 1))))
    expect(failedChecks(r)).toContain("commit-chain")
    expect(chainMessages(r)).toEqual([[approved, expect.stringMatching(/prev does not match the digest of seq \d+.*removed, inserted or reordered/)]])
  })

  it("the call's first commit deleted -> commit-chain", async () => {
    const r = await replayCopy(await copyRaw(original, rewriteCall(approved, (mine) => mine.slice(1))))
    expect(chainMessages(r)).toEqual([[approved, expect.stringMatching(/first commit but names a previous one/)]])
  })

  it("two commits of a call reordered -> commit-chain", async () => {
    const r = await replayCopy(await copyRaw(original, rewriteCall(approved, (mine) => [mine[0]!, mine[2]!, mine[1]!, ...mine.slice(3)])))
    expect(failedChecks(r)).toContain("commit-chain")
    expect(checkOf(r, "commit-chain").violations.length).toBeGreaterThanOrEqual(2)
  })

  it("a commit inserted (copied from another call, renamed) -> commit-chain", async () => {
    const r = await replayCopy(
      await copyRaw(
        original,
        rewriteCall(approved, (mine) => {
          const c = decode(mine[0]!)
          const inserted = { subject: mine[0]!.subject, data: encode({ ...c, commit_id: `${c.commit_id}:x`, prev: commitDigest(mine[0]!.data) }) }
          return [mine[0]!, inserted, ...mine.slice(1)]
        })
      )
    )
    expect(failedChecks(r)).toContain("commit-chain")
    expect(chainMessages(r)).toEqual(expect.arrayContaining([[approved, expect.stringMatching(/signature does not verify/)], [approved, expect.stringMatching(/prev does not match/)]]))
  })

  it("an event edited inside a signed commit, its chain recomputed, the stale signatures kept -> commit-chain, with or without a trust root", async () => {
    const edited = rewriteCall(approved, (mine) => {
      const c = decode(mine[1]!)
      const tampered = [{ subject: mine[0]!.subject, data: mine[0]!.data }, { subject: mine[1]!.subject, data: encode({ ...c, events: [{ ...c.events[0], at: "2020-01-01T00:00:00.000Z" }, ...c.events.slice(1)] as Commit["events"] }) }, ...mine.slice(2)]
      return rechain(tampered, false)
    })
    const r = await replayCopy(await copyRaw(original, edited))
    expect(failedChecks(r)).toContain("commit-chain")
    expect(chainMessages(r)).toEqual(expect.arrayContaining([[approved, expect.stringMatching(/seq \d+'s signature does not verify/)]]))
    expect(chainMessages(r).every(([, m]) => !/prev/.test(m!))).toBe(true)
  })

  it("an event edited and the call's chain rebuilt unsigned (no key) -> commit-chain under --trust; without a root only the note says unsigned", async () => {
    const edited = rewriteCall(approved, (mine) => {
      const c = decode(mine[1]!)
      return rechain([mine[0]!, { subject: mine[1]!.subject, data: encode({ ...c, events: [{ ...c.events[0], at: "2020-01-01T00:00:00.000Z" }, ...c.events.slice(1)] as Commit["events"] }) }, ...mine.slice(2)], true)
    })
    const stream = await copyRaw(original, edited)
    const anchored = await replayCopy(stream, true)
    expect(failedChecks(anchored)).toContain("commit-chain")
    expect(chainMessages(anchored)).toEqual(expect.arrayContaining([[approved, expect.stringMatching(/is not signed, but the trust root names kernel keys/)]]))
    const bare = await replayCopy(stream)
    expect(failedChecks(bare)).not.toContain("commit-chain")
    expect(checkOf(bare, "commit-chain").note).toMatch(/commit\(s\) unsigned/)
  })

  it("a commit re-signed with a key the trust root does not list -> commit-chain under --trust", async () => {
    const other = join(dir, "forger.key")
    generateKernelKey(other)
    const forger = Either.getOrThrow(readKernelKey(other))
    const { chainCommit } = await import("../../runtime/schema/Commit.js")
    const edited = rewriteCall(approved, (mine) => {
      const out: Array<Raw> = []
      for (const m of mine) {
        const { key: _k, sig: _s, ...c } = decode(m)
        out.push({ subject: m.subject, data: encode(chainCommit(c, out.length === 0 ? "" : commitDigest(out[out.length - 1]!.data), forger)) })
      }
      return out
    })
    const r = await replayCopy(await copyRaw(original, edited), true)
    expect(chainMessages(r)).toEqual(expect.arrayContaining([[approved, expect.stringMatching(/signed by a key the trust root does not list/)]]))
  })

  it("an export of a signing kernel's call is evidence without a signature of its own: its commits verify against the trust root; an edited commit or event does not", async () => {
    const doc = JSON.parse(JSON.stringify(await Effect.runPromise(exportOver({ servers: nats.servers, ...Roles.auditor }, { held: approved })))) as {
      commits: Array<{ seq: number; stored: string }>
      events: Array<{ event: Record<string, unknown> }>
      events_digest: string
    }
    expect(doc.commits.length).toBeGreaterThanOrEqual(3)
    expect(verifyExport(doc, trusted())).toMatchObject({ ok: true, rooted: true, problems: [] })

    const storedEdit = structuredClone(doc)
    storedEdit.commits[0]!.stored = storedEdit.commits[0]!.stored.replace('"amount":5000', '"amount":5')
    expect(verifyExport(storedEdit, trusted()).problems).toEqual(expect.arrayContaining([expect.stringMatching(/^commit-chain: seq \d+'s signature does not verify/), "the events are not exactly the exported commits' events"]))

    const eventEdit = structuredClone(doc)
    eventEdit.events[0]!.event["at"] = new Date(0).toISOString()
    eventEdit.events_digest = jcsDigest(eventEdit.events)
    expect(verifyExport(eventEdit, trusted()).problems).toEqual(["the events are not exactly the exported commits' events"])

    const truncated = structuredClone(doc)
    truncated.commits = truncated.commits.slice(1)
    expect(verifyExport(truncated, trusted()).problems).toContainEqual(expect.stringMatching(/^commit-chain: seq \d+ is the call's first commit but names a previous one/))
  })
})
