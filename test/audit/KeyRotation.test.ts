import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DeliverPolicy, jetstream, jetstreamManager, StorageType } from "@nats-io/jetstream"
import { Effect, Either } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { generateKernelKey, readKernelKey, type KernelKey } from "../../runtime/ledger/KernelKey.js"
import { recordKeyRotation } from "../../runtime/ledger/KeyRotations.js"
import { layerNats } from "../../runtime/ledger/Nats.js"
import { signKeyRotation, type KeyRotation } from "../../runtime/schema/KeyRotation.js"
import { Streams } from "../../runtime/schema/Subjects.js"
import { Roles, startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { checkOf, failedChecks, replayAs, trustRootFor } from "./support.js"

// A kernel key handed on: the trust root names only the first key; the rotation record, signed
// by the old key and the new, makes the new key's commits trusted after it. A forger's own key
// reaches no trust through a record the old key did not sign.

let nats: TestNats
let conns: Array<NatsConnection> = []
let kernelConn: NatsConnection
let dir: string
let first: KernelKey
let second: KernelKey
const profile = testProfile()
let original: Array<Raw>
let rotationSeq = 0

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
const copyRaw = async (messages: ReadonlyArray<Raw>, edit: (ms: Array<Raw>) => Array<Raw> = (ms) => ms): Promise<string> => {
  const n = ++copies
  const name = `WK_ROT_COPY${n}`
  await (await jetstreamManager(kernelConn)).streams.add({ name, subjects: [`rot${n}.wk.v1.events.>`], storage: StorageType.Memory })
  const js = jetstream(kernelConn)
  for (const m of edit(messages.map((x) => ({ ...x })))) await js.publish(`rot${n}.${m.subject}`, m.data)
  return name
}

const trustFirst = () => ({ ...trustRootFor([profile]), kernel_keys: [first.publicKey] })
const replayCopy = (stream: string) => replayAs(nats.servers, "kernel", { stream, factsBucket: null, sessionsStream: null, trust: trustFirst() })
const keyFile = (name: string) => {
  generateKernelKey(join(dir, name))
  process.env["WK_KERNEL_KEY"] = join(dir, name)
  return Either.getOrThrow(readKernelKey(join(dir, name)))
}

/** A kernel signing with the key WK_KERNEL_KEY names serves one ALLOW call, then stops. */
const oneCallUnder = async (n: number) => {
  const kernel: InProcessKernel = await startKernel(nats.servers, [profile])
  try {
    const agent = await connectAs(nats.servers, "agent")
    conns.push(agent)
    const r = (await clientFor(agent, "agent:alice").propose({ session_id: "s-rot", turn_id: `t${n}`, call_id: `c${n}`, tool: "money_transfer", args: { from: "a", to: "shop", amount: n } } as never)) as { status: number }
    expect(r.status).toBe(200)
  } finally {
    await kernel.stop()
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "wk-key-rotation-"))
  process.env["WK_CHECKPOINT_INTERVAL_MS"] = "0"
  nats = await startTestNats()
  const [tool, k] = await Promise.all([connectAs(nats.servers, "bank"), connectAs(nats.servers, "kernel")])
  conns = [tool, k]
  kernelConn = k
  new DemoBank().serve(tool)
  first = keyFile("first.key")
  await oneCallUnder(1)
  second = keyFile("second.key")
  rotationSeq = (await Effect.runPromise(recordKeyRotation(first, second, new Date()).pipe(Effect.provide(layerNats({ servers: nats.servers, ...Roles.kernel }))))).seq
  await oneCallUnder(2)
  original = await readRaw(kernelConn)
}, 90_000)

afterAll(async () => {
  delete process.env["WK_KERNEL_KEY"]
  delete process.env["WK_CHECKPOINT_INTERVAL_MS"]
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
  rmSync(dir, { recursive: true, force: true })
})

const commitKeys = (ms: ReadonlyArray<Raw>) => [...new Set(ms.filter((m) => m.subject.startsWith("wk.v1.events.h_")).map((m) => (JSON.parse(new TextDecoder().decode(m.data)) as { key: string }).key))]

describe("kernel key rotation", () => {
  it("commits before the rotation are signed by the first key, after it by the second; a root naming only the first key trusts both through the record", async () => {
    expect(commitKeys(original.filter((m) => m.seq < rotationSeq))).toEqual([first.publicKey])
    expect(commitKeys(original.filter((m) => m.seq > rotationSeq))).toEqual([second.publicKey])
    const r = await replayAs(nats.servers, "auditor", { factsBucket: null, sessionsStream: null, trust: trustFirst() })
    expect(failedChecks(r)).toEqual([])
    expect(checkOf(r, "commit-chain").status).toBe("passed")
  })

  it("the rotation record removed: the second key's commits are signed by a key the root does not reach", async () => {
    const r = await replayCopy(await copyRaw(original, (ms) => ms.filter((m) => m.seq !== rotationSeq)))
    expect(failedChecks(r)).toContain("commit-chain")
    expect(checkOf(r, "commit-chain").violations.map((v) => v.message)).toContainEqual(expect.stringMatching(/signed by a key the trust root does not list as a kernel key \(nor a rotation from one before it\)/))
  })

  it("a forger's rotation to its own key, signed by that key but not by a trusted one, is a violation and trusts nothing", async () => {
    generateKernelKey(join(dir, "forger.key"))
    const forger = Either.getOrThrow(readKernelKey(join(dir, "forger.key")))
    const genuine = signKeyRotation(first, forger, new Date().toISOString())
    const forged: KeyRotation = { ...genuine, sig_from: signKeyRotation(forger, forger, genuine.at).sig_from }
    const r = await replayCopy(await copyRaw(original, (ms) => [...ms, { seq: 0, subject: "wk.v1.events._keys", data: new TextEncoder().encode(JSON.stringify(forged)) }]))
    expect(failedChecks(r)).toContain("commit-chain")
    expect(checkOf(r, "commit-chain").violations).toContainEqual(expect.objectContaining({ held_id: "_keys", message: expect.stringMatching(/does not verify under both its keys/) }))
  })

  it("a rotation from a key no root reaches (the forger's own chain of keys) trusts nothing", async () => {
    generateKernelKey(join(dir, "x.key"))
    generateKernelKey(join(dir, "y.key"))
    const x = Either.getOrThrow(readKernelKey(join(dir, "x.key")))
    const y = Either.getOrThrow(readKernelKey(join(dir, "y.key")))
    const r = await replayCopy(await copyRaw(original, (ms) => [...ms, { seq: 0, subject: "wk.v1.events._keys", data: new TextEncoder().encode(JSON.stringify(signKeyRotation(x, y, new Date().toISOString()))) }]))
    expect(checkOf(r, "commit-chain").violations).toContainEqual(expect.objectContaining({ held_id: "_keys", message: expect.stringMatching(/starts from a key the trust root does not reach/) }))
  })
})
