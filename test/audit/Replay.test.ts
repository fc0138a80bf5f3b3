import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { jetstream, jetstreamManager } from "@nats-io/jetstream"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventsOf, eventually } from "../support/Stream.js"
import { checkOf, copyStream, failedChecks, forgedApproval, readAll, replayAs, trustRootFor, type CopiedMessage } from "./support.js"
import nacl from "tweetnacl"
import { signEnvelope } from "../../runtime/schema/EnvelopeSignature.js"
import { callDigest, jcsDigest } from "../../runtime/schema/Canonical.js"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { Either } from "effect"
import { generateKernelKey, readKernelKey, signDocument } from "../../runtime/ledger/KernelKey.js"
import { join } from "node:path"
import { exportOver } from "../../runtime/audit/Export.js"
import { verifyExport } from "../../runtime/audit/VerifyExport.js"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { Roles } from "../support/TestNats.js"

const forger = nacl.sign.keyPair()

/**
 * Runs `wk ...` as its own process, without blocking this worker (a blocked worker cannot answer
 * vitest's runner, which gives up after a minute).
 */
const wk = (args: ReadonlyArray<string>, env: Record<string, string> = {}): Promise<{ status: number | null; stdout: string; stderr: string }> =>
  new Promise((resolve) => {
    execFile(process.execPath, ["--import", "tsx", join(repoRoot, "runtime/cli/main.ts"), ...args], { cwd: repoRoot, env: { ...process.env, NATS_URL: "", ...env }, encoding: "utf8", timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ status: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr })
    )
  })

// Real histories through an in-process kernel, replayed with the auditor's credentials; then
// copies of the stream with one thing changed, each caught by the check that owns it.
let nats: TestNats
let kernel: InProcessKernel
let bank: DemoBank
let conns: Array<NatsConnection> = []
let kernelConn: NatsConnection
let alice: WitnessClient
let carol: WitnessClient
let zoe: WitnessClient
let root: WitnessClient
const profile = testProfile()

let n = 0
const transfer = (amount: number, extra: Record<string, unknown> = {}) => ({ session_id: "s-audit", turn_id: "t1", call_id: `a${++n}`, tool: "money_transfer", args: { from: `acct-${n}`, to: "shop", amount }, ...extra })
type Held = { status: number; held_id: string; call_digest: string; generation: number; witness_request: { contract_digest: string } }
const bindingOf = (h: Held) => ({ held_id: h.held_id, generation: h.generation, call_digest: h.call_digest, contract_digest: h.witness_request.contract_digest })
const factsOf = async (id: string) => (await alice.get(id)).held as Record<string, unknown>
const ids: Record<string, string> = {}

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [profile])
  const [tool, agent, witness, k] = await Promise.all([connectAs(nats.servers, "bank"), connectAs(nats.servers, "agent"), connectAs(nats.servers, "witness"), connectAs(nats.servers, "kernel")])
  conns = [tool, agent, witness, k]
  kernelConn = k
  bank = new DemoBank().serve(tool)
  alice = clientFor(agent, "agent:alice")
  carol = clientFor(witness, "user:carol")
  zoe = clientFor(witness, "compliance:zoe")
  root = clientFor(k, "admin:root")

  // ALLOW, DENY (threshold and missing grant)
  const allowed = (await alice.propose(transfer(50) as never)) as Held
  expect(allowed.status).toBe(200)
  ids["allow"] = allowed.held_id
  const denied = (await alice.propose(transfer(500_000) as never)) as Held
  expect(denied.status).toBe(403)
  ids["deny"] = denied.held_id
  const ungranted = (await clientFor(agent, "agent:bob").propose({ session_id: "s-audit", turn_id: "t1", call_id: "b1", tool: "bank_balance", args: {} } as never)) as Held
  expect(ungranted.status).toBe(403)
  // held + approve, delivered and acknowledged
  const approved = (await alice.propose(transfer(5000) as never)) as Held
  expect(approved.status).toBe(202)
  ids["approved"] = approved.held_id
  expect((await carol.attest({ ...bindingOf(approved), class: "human", decision: "approve" })).disposition).toBe("accepted")
  expect(await alice.result(approved.held_id)).toMatchObject({ outcome: "completed", admission: "admitted" })
  // veto
  const vetoed = (await alice.propose(transfer(9000) as never)) as Held
  ids["vetoed"] = vetoed.held_id
  expect((await zoe.attest({ ...bindingOf(vetoed), class: "compliance", decision: "reject" })).disposition).toBe("accepted")
  // expiry and cancel
  const expiring = (await alice.propose(transfer(9100, { preferences: { expires_in_ms: 400 } }) as never)) as Held
  ids["expired"] = expiring.held_id
  const cancelled = (await alice.propose(transfer(9200) as never)) as Held
  ids["cancelled"] = cancelled.held_id
  expect(await alice.cancel(cancelled.held_id)).toEqual({ status: 200, lifecycle: "cancelled" })
  // a parked call across a policy change, then approved under the new epoch
  const parked = (await alice.propose(transfer(7000) as never)) as Held
  ids["across-epochs"] = parked.held_id
  expect((await root.applyPolicy(profile as never)).status).toBe(200)
  await eventually(async () => (await factsOf(parked.held_id))["policy_epoch_checked"] === 2)
  expect((await carol.attest({ ...bindingOf(parked), class: "human", decision: "approve" })).disposition).toBe("accepted")
  // one left open, waiting for a witness
  const open = (await alice.propose(transfer(7500) as never)) as Held
  ids["open"] = open.held_id

  for (const k of ["approved", "vetoed", "expired", "cancelled", "across-epochs"]) {
    await eventually(async () => ["delivered", "acknowledged"].includes(String((await factsOf(ids[k]!))["continuation_delivery"])))
  }
}, 60_000)

afterAll(async () => {
  await kernel?.stop()
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
})

describe("wk audit replay over real histories", () => {
  it("passes every check with the auditor's read-only credentials", async () => {
    const r = await eventually(async () => {
      const x = await replayAs(nats.servers, "auditor")
      // the projection is written after each reply: wait until it holds all nine calls
      return x.held_calls === 9 && x.projection !== null && x.projection.matched === 9 && x.projection.lagging === 0 && x.projection.missing === 0 ? x : undefined
    }, 40_000)
    expect(failedChecks(r), JSON.stringify(r.checks.filter((c) => c.status === "failed"), null, 1)).toEqual([])
    expect(r.ok).toBe(true)
    expect(r.policy_epochs).toEqual([1, 2])
    expect(r.held_calls).toBe(9)
    expect(checkOf(r, "signatures").checked).toBeGreaterThanOrEqual(12)
    expect(checkOf(r, "attestation-binding")).toMatchObject({ status: "passed", checked: 3 })
    expect(checkOf(r, "effect-safety")).toMatchObject({ status: "passed", checked: 3 })
    expect(checkOf(r, "delivery")).toMatchObject({ status: "passed" })
    expect(checkOf(r, "delivery").checked).toBeGreaterThanOrEqual(5)
    expect(checkOf(r, "projection")).toMatchObject({ status: "passed" })
    expect(r.projection!.matched).toBe(9)
    // Re-run by default; this profile pins no plugin, so there is no decision to re-run.
    expect(checkOf(r, "plugin-rerun").status).toBe("passed")
    const cheap = await replayAs(nats.servers, "auditor", { rerunPlugins: false, sessionsStream: null })
    expect(checkOf(cheap, "plugin-rerun")).toMatchObject({ status: "skipped", note: expect.stringMatching(/--no-rerun.*unverified/) })
  })

  it("selects one held call, a start sequence (earlier events backfilled) or a start time", async () => {
    const one = await replayAs(nats.servers, "auditor", { selection: { held: ids["approved"]! } })
    expect(one).toMatchObject({ ok: true, held_calls: 1, backfilled: 0 })
    const events = await eventsOf(kernelConn, ids["across-epochs"]!)
    const mid = events.find((e) => e.type === "attestation.accepted")!.seq
    const tail = await replayAs(nats.servers, "auditor", { selection: { fromSeq: mid } })
    expect(tail.ok).toBe(true)
    expect(tail.backfilled).toBeGreaterThan(0)
    expect(tail.first_seq).toBe(mid)
    const none = await replayAs(nats.servers, "auditor", { selection: { since: new Date(Date.now() + 60_000) } })
    expect(none).toMatchObject({ ok: true, events: 0, held_calls: 0 })
  })
})

describe("tampered copies of the stream fail with the right check", () => {
  let original: Array<CopiedMessage & { seq: number }>
  const on = (id: string) => `wk.v1.events.${id}`
  const replayCopy = async (edit: (ms: Array<CopiedMessage>) => Array<CopiedMessage>) => {
    const stream = await copyStream(kernelConn, original, edit)
    // The copy is renumbered, so the KV projection of the original is not comparable.
    return replayAs(nats.servers, "kernel", { stream, factsBucket: null })
  }

  beforeAll(async () => {
    original = await readAll(kernelConn)
  })

  it("an unmodified copy passes", async () => {
    const r = await replayCopy((ms) => ms)
    expect(failedChecks(r)).toEqual([])
  })

  it("an event removed: the approval behind a dispatch -> effect-safety", async () => {
    const r = await replayCopy((ms) => ms.filter((m) => !(m.subject === on(ids["approved"]!) && m.body["type"] === "attestation.accepted")))
    expect(failedChecks(r)).toContain("effect-safety")
    const v = checkOf(r, "effect-safety").violations
    expect(v.map((x) => x.held_id)).toEqual([ids["approved"]])
    expect(v[0]!.message).toContain("invariant 2")
  })

  it("a message deleted from the stream leaves a gap -> stream", async () => {
    const stream = await copyStream(kernelConn, original)
    const jsm = await jetstreamManager(kernelConn)
    await jsm.streams.deleteMessage(stream, 5)
    const r = await replayAs(nats.servers, "kernel", { stream, factsBucket: null })
    expect(failedChecks(r)).toContain("stream")
  })

  it("an attestation's contract digest changed (event and signed payload) -> attestation-binding and signatures", async () => {
    const forged = "0".repeat(64)
    const r = await replayCopy((ms) =>
      ms.map((m) => {
        if (m.subject !== on(ids["approved"]!) || m.body["type"] !== "attestation.accepted") return m
        const env = m.body["envelope"] as { payload: Record<string, unknown> }
        return { ...m, body: { ...m.body, contract_digest: forged, envelope: { ...env, payload: { ...env.payload, contract_digest: forged } } } }
      })
    )
    expect(failedChecks(r)).toEqual(expect.arrayContaining(["attestation-binding", "signatures"]))
    expect(checkOf(r, "attestation-binding").violations[0]).toMatchObject({ held_id: ids["approved"] })
    expect(checkOf(r, "attestation-binding").violations[0]!.message).toContain("contract mismatch")
  })

  it("a forged attestation whose envelope key is written with a JSON escape is still verified -> signatures", async () => {
    // The replay sends bodies containing the bytes "envelope" to its verifier threads; this one
    // decodes to an envelope without them, so the signatures check must verify it itself.
    const isTarget = (m: CopiedMessage) => m.subject === on(ids["approved"]!) && m.body["type"] === "attestation.accepted"
    const stream = await copyStream(
      kernelConn,
      original,
      (ms) => ms.map((m) => (isTarget(m) ? { ...m, body: { ...m.body, envelope: { ...(m.body["envelope"] as object), sig: Buffer.alloc(64, 7).toString("base64") } } } : m)),
      (m) => (isTarget(m) ? JSON.stringify(m.body).replace('"envelope":', '"\\u0065nvelope":') : JSON.stringify(m.body))
    )
    const r = await replayAs(nats.servers, "kernel", { stream, factsBucket: null })
    expect(failedChecks(r)).toEqual(["signatures"])
    expect(checkOf(r, "signatures").violations).toMatchObject([{ held_id: ids["approved"], message: expect.stringContaining("does not verify") }])
  })

  it("an effect added without readiness (a parked call dispatched and recorded) -> effect-safety", async () => {
    const id = ids["open"]!
    const key = `${id}:g1`
    const at = new Date().toISOString()
    const base = { held_id: id, generation: 1, at }
    const r = await replayCopy((ms) => [
      ...ms,
      { subject: on(id), body: { ...base, type: "execution.leased", event_id: `execution.leased:${id}:${key}:a1`, owner: "forger", lease_until: at } },
      { subject: on(id), body: { ...base, type: "effect.dispatched", event_id: `effect.dispatched:${id}:${key}:a1`, idempotency_key: key, attempt: 1, owner: "forger", lease_until: at, policy_epoch: 2 } },
      { subject: on(id), body: { ...base, type: "effect.recorded", event_id: `effect.recorded:${id}:${key}`, idempotency_key: key, ok: true, result: {}, via: "dispatch" } }
    ])
    expect(failedChecks(r)).toEqual(["effect-safety"])
    const v = checkOf(r, "effect-safety").violations
    expect(v).toHaveLength(1)
    expect(v[0]).toMatchObject({ held_id: id })
    expect(v[0]!.message).toContain("readiness was unsatisfied")
  })

  it("a second effect recorded for one idempotency key -> effect-safety", async () => {
    const id = ids["approved"]!
    const recorded = original.find((m) => m.subject === on(id) && m.body["type"] === "effect.recorded")!
    const r = await replayCopy((ms) => [...ms, { subject: on(id), body: { ...recorded.body, event_id: `${recorded.body["event_id"]}:again`, result: { amount: 5000, again: true } } }])
    expect(failedChecks(r)).toEqual(["effect-safety"])
    expect(checkOf(r, "effect-safety").violations[0]!.message).toContain("more than one effect recorded")
  })
  it("a commit on the subject of one call whose events name another (forged with the kernel's credentials) -> stream", async () => {
    const a = ids["open"]!
    const b = ids["allow"]!
    // An event of B moved into a commit on A's subject, and a whole commit of B re-published on A's subject.
    const ofB = original.find((m) => m.subject === on(b) && m.body["type"] === "call.adjudicated")!
    const stream = await copyStream(kernelConn, original, (ms) => [...ms, { subject: on(a), body: ofB.body, commit: "forged-1" }])
    const prefix = `copy${stream.slice("WK_EVENTS_COPY".length)}.`
    const commitOfB = { commit_id: "forged-2", held_id: b, events: [ofB.body] }
    await jetstream(kernelConn).publish(`${prefix}${on(a)}`, new TextEncoder().encode(JSON.stringify(commitOfB)))
    const r = await replayAs(nats.servers, "kernel", { stream, factsBucket: null })
    expect(failedChecks(r)).toContain("stream")
    const messages = checkOf(r, "stream").violations.filter((v) => v.held_id === a).map((v) => v.message)
    expect(messages).toEqual(
      expect.arrayContaining([
        expect.stringMatching(new RegExp(`index 0: an event of ${b} is stored on the subject of ${a}`)),
        `a commit of ${b} is stored on the subject of ${a}`
      ])
    )
  })

  it("one event twice in one commit, or a commit without events -> stream", async () => {
    const id = ids["approved"]!
    const att = original.find((m) => m.subject === on(id) && m.body["type"] === "attestation.accepted")!
    const twice = { subject: on(id), body: att.body, commit: "twice" }
    const stream = await copyStream(kernelConn, original, (ms) => [...ms, twice, twice])
    const prefix = `copy${stream.slice("WK_EVENTS_COPY".length)}.`
    await jetstream(kernelConn).publish(`${prefix}${on(id)}`, new TextEncoder().encode(JSON.stringify({ commit_id: "empty", held_id: id, events: [] })))
    const r = await replayAs(nats.servers, "kernel", { stream, factsBucket: null })
    const messages = checkOf(r, "stream").violations.map((v) => v.message)
    expect(messages).toEqual(expect.arrayContaining([expect.stringMatching(/index 1: repeats event attestation\.accepted:.* of index 0 in the same commit/), expect.stringMatching(/a commit does not decode: .*without events/)]))
  })
})

describe("forgeries that remove, move or rewrite what the log says", () => {
  let original: Array<CopiedMessage & { seq: number }>
  const on = (id: string) => `wk.v1.events.${id}`
  const replayCopy = async (edit: (ms: Array<CopiedMessage>) => Array<CopiedMessage>, options: { settleMs?: number } = {}) =>
    replayAs(nats.servers, "kernel", { stream: await copyStream(kernelConn, original, edit), factsBucket: null, ...options })
  const dropping = (id: string, type: string) => (ms: Array<CopiedMessage>) => ms.filter((m) => !(m.subject === on(id) && m.body["type"] === type))
  beforeAll(async () => {
    original = await readAll(kernelConn)
  })

  it("the compliance veto removed -> consistency names the denial without its reject", async () => {
    const r = await replayCopy(dropping(ids["vetoed"]!, "attestation.accepted"))
    expect(failedChecks(r)).toContain("consistency")
    expect(checkOf(r, "consistency").violations).toEqual([expect.objectContaining({ held_id: ids["vetoed"], message: expect.stringMatching(/^denied in the name of compliance:zoe/) })])
  })

  it("call.denied removed from a DENY call -> consistency, once the call had time to settle", async () => {
    const r = await replayCopy(dropping(ids["deny"]!, "call.denied"), { settleMs: 1 })
    expect(checkOf(r, "consistency").violations).toEqual([expect.objectContaining({ held_id: ids["deny"], message: "the verdict is DENY but the call was never denied (call.denied missing)" })])
  })

  it("a delivery removed from the log while its message stays in WK_SESSIONS -> delivery", async () => {
    const r = await replayCopy((ms) => ms.filter((m) => !(m.subject === on(ids["approved"]!) && String(m.body["type"]).startsWith("delivery."))), { settleMs: 1 })
    expect(checkOf(r, "delivery").violations).toEqual(expect.arrayContaining([expect.objectContaining({ held_id: ids["approved"], message: expect.stringMatching(/has no delivery.published in the call's history \(it says /) })]))
  })

  it("args.to changed on an ALLOW call with its call_digest recomputed -> signatures compares with the signed proposal", async () => {
    const r = await replayCopy((ms) =>
      ms.map((m) => {
        if (m.subject !== on(ids["allow"]!) || m.body["type"] !== "call.proposed") return m
        const args = { ...(m.body["args"] as Record<string, unknown>), to: "acct-forger" }
        return { ...m, body: { ...m.body, args, call_digest: callDigest(String(m.body["tool"]), args) } }
      })
    )
    expect(checkOf(r, "signatures").violations).toEqual([expect.objectContaining({ held_id: ids["allow"], message: "call.proposed: args are not the signed proposal's args" })])
  })

  it("the policy records swapped -> registry; the later epoch's keys are not trusted", async () => {
    const r = await replayCopy((ms) => {
      const records = ms.filter((m) => m.subject === "wk.v1.events._policy")
      const [first, second] = [ms.indexOf(records[0]!), ms.indexOf(records[1]!)]
      const out = [...ms]
      ;[out[first], out[second]] = [out[second]!, out[first]!]
      return out
    })
    expect(failedChecks(r)).toContain("registry")
    expect(checkOf(r, "registry").violations.map((v) => v.message)).toEqual(expect.arrayContaining([expect.stringMatching(/^policy record moved: epoch 1 sits after epoch 2/)]))
    expect(r.policy_epochs).toEqual([])
  })
})

describe("trust from outside the stream", () => {
  let original: Array<CopiedMessage & { seq: number }>
  const on = (id: string) => `wk.v1.events.${id}`
  beforeAll(async () => {
    original = await readAll(kernelConn)
  })

  /**
   * The forger's history: a `policy.applied` record registering two witnesses with keys the
   * forger made, then their approvals of the open call and its whole execution, under the
   * forged epoch. Every event the forger writes is well formed and every new signature verifies.
   */
  const forged = (appliedBy?: Record<string, unknown>) => (ms: Array<CopiedMessage>): Array<CopiedMessage> => {
    const id = ids["open"]!
    const mine = ms.filter((m) => m.subject === on(id))
    const held = mine.find((m) => m.body["type"] === "call.held")!.body
    const proposed = mine.find((m) => m.body["type"] === "call.proposed")!.body
    const lastPolicy = [...ms].reverse().find((m) => m.subject === "wk.v1.events._policy")!.body
    const epoch = Number(lastPolicy["epoch"]) + 1
    const witnesses = ["user:x1", "user:x2"].map((name) => ({ name, pair: nacl.sign.keyPair() }))
    const widened = { ...profile, principals: { ...profile.principals, ...Object.fromEntries(witnesses.map((w) => [w.name, { keys: [Buffer.from(w.pair.publicKey).toString("base64")], classes: ["human"] }])) } }
    const at = new Date().toISOString()
    const record = { type: "policy.applied", event_id: `policy.applied:e${epoch}`, epoch, at, profiles: [widened], ...(appliedBy !== undefined ? { applied_by: appliedBy } : {}) }
    const binding = { held_id: id, generation: 1, call_digest: String(proposed["call_digest"]), contract_digest: String((held["witness_request"] as { contract_digest: string }).contract_digest) }
    const template = ms.find((m) => m.subject === on(ids["approved"]!) && m.body["type"] === "attestation.accepted")!.body
    const key = `${id}:g1`
    const base = { held_id: id, generation: 1, at }
    return [
      ...ms,
      { subject: "wk.v1.events._policy", body: record },
      ...witnesses.map((w) => ({ subject: on(id), body: forgedApproval(template, binding, w.name, w.pair.secretKey) })),
      { subject: on(id), body: { ...base, type: "execution.leased", event_id: `execution.leased:${id}:${key}:a1`, owner: "forger", lease_until: at } },
      { subject: on(id), body: { ...base, type: "effect.dispatched", event_id: `effect.dispatched:${id}:${key}:a1`, idempotency_key: key, attempt: 1, owner: "forger", lease_until: at, policy_epoch: epoch } },
      { subject: on(id), body: { ...base, type: "effect.recorded", event_id: `effect.recorded:${id}:${key}`, idempotency_key: key, ok: true, result: { forged: true }, via: "dispatch" } }
    ]
  }

  it("the real log verifies from the organization's trust root; without one the replay says it is unanchored", async () => {
    const stream = await copyStream(kernelConn, original)
    const rooted = await replayAs(nats.servers, "kernel", { stream, factsBucket: null, trust: trustRootFor([profile]) })
    expect(failedChecks(rooted)).toEqual([])
    expect(rooted).toMatchObject({ registry_rooted: true, policy_epochs: [1, 2] })
    const bare = await replayAs(nats.servers, "kernel", { stream, factsBucket: null })
    expect(bare).toMatchObject({ ok: true, registry_rooted: false, registry_origin: expect.stringMatching(/^UNANCHORED: .*epoch 1, seq \d+, profiles sha256 [0-9a-f]{64}/) })
  })

  it("keys added by an unsigned policy record, then approvals and an execution forged with them -> registry and signatures", async () => {
    for (const trust of [trustRootFor([profile]), undefined]) {
      const stream = await copyStream(kernelConn, original, forged())
      const r = await replayAs(nats.servers, "kernel", { stream, factsBucket: null, ...(trust ? { trust } : {}) })
      expect(failedChecks(r)).toEqual(expect.arrayContaining(["registry", "signatures", "effect-safety"]))
      expect(r.policy_epochs).toEqual([1, 2])
      expect(checkOf(r, "registry").violations[0]!.message).toMatch(/^epoch 3 widens policy \(principals.user:x1: principal 'user:x1' is added.*no signed origin.*its keys are not trusted$/)
      const unregistered = checkOf(r, "signatures").violations.map((v) => v.message)
      expect(unregistered).toHaveLength(2)
      for (const m of unregistered) expect(m).toMatch(/was not registered to user:x[12]/)
    }
  })

  it("the same forgery claiming a witnessed change or an admin's signed request -> registry", async () => {
    const stream = await copyStream(kernelConn, original, forged({ held_id: ids["approved"]! }))
    const r = await replayAs(nats.servers, "kernel", { stream, factsBucket: null, trust: trustRootFor([profile]) })
    expect(failedChecks(r)).toEqual(expect.arrayContaining(["registry", "signatures"]))
    expect(checkOf(r, "registry").violations[0]!.message).toContain(`epoch 3 (witnessed change ${ids["approved"]}) is not authorized: the call has no signed policy.apply proposal`)
    // An envelope the forger signed with a key of its own, naming an admin.
    const env = signEnvelope({ op: "policy.apply", principal: "admin:root", profile, nonce: "n", expires_at: new Date(Date.now() + 60_000).toISOString() }, nacl.sign.keyPair().secretKey)
    const r2 = await replayAs(nats.servers, "kernel", { stream: await copyStream(kernelConn, original, forged({ envelope: env })), factsBucket: null })
    expect(checkOf(r2, "registry").violations[0]!.message).toMatch(/^policy change by a non-admin: epoch 3 was applied by admin:root, whose key is not a policy admin's in epoch 2/)
  })

  it("a start-up profile set the trust root does not list is not trusted", async () => {
    const stream = await copyStream(kernelConn, original)
    const r = await replayAs(nats.servers, "kernel", { stream, factsBucket: null, trust: { ...trustRootFor([profile]), startup_profiles: [] } })
    // Nothing derives from the root: no key is shown registered, so no signature is verified either.
    expect(r.ok).toBe(false)
    expect(failedChecks(r)).toEqual(["registry"])
    expect(checkOf(r, "signatures").status).toBe("pending")
    expect(checkOf(r, "registry").violations[0]!.message).toMatch(/^epoch 1 was loaded from profile files whose digest [0-9a-f]{64} the trust root does not list/)
  })
})

describe("wk audit export", () => {
  it("exports one call as a document that verifies offline with its public keys alone; any edit breaks it", async () => {
    const doc = await Effect.runPromise(exportOver({ servers: nats.servers, ...Roles.auditor }, { held: ids["approved"]! }))
    expect(doc.events.map((e) => e.event.type)).toContain("attestation.accepted")
    expect(Object.keys(doc.keys).sort()).toEqual(["agent:alice", "user:carol"])
    expect(doc.registry.map((r) => r.epoch)).toEqual([1, 2])
    expect(doc.deliveries!.length).toBeGreaterThanOrEqual(1)
    // Through JSON, as an external party receives it.
    const received = JSON.parse(JSON.stringify(doc)) as typeof doc
    const v = verifyExport(received)
    expect(v.problems).toEqual([])
    expect(v.checks.filter((c) => c.status === "failed")).toEqual([])
    expect(v.ok).toBe(true)

    const edited = structuredClone(received) as unknown as { events: Array<{ event: Record<string, unknown> }> }
    const att = edited.events.find((e) => e.event["type"] === "attestation.accepted")!
    ;(att.event["envelope"] as { payload: Record<string, unknown> }).payload["nonce"] = "another-nonce-123"
    const broken = verifyExport(edited)
    expect(broken.ok).toBe(false)
    expect(broken.problems).toContain("events_digest does not match the events")
    expect(broken.checks.find((c) => c.name === "signatures")!.status).toBe("failed")

    const otherKey = structuredClone(received) as unknown as { keys: Record<string, Array<string>> }
    otherKey.keys["user:carol"] = ["A".repeat(43) + "="]
    expect(verifyExport(otherKey).problems.some((p) => p.includes("not among the exported keys"))).toBe(true)

    // Events are addressed (seq, index): an index left out of its commit or repeated is reported,
    // even with the digest recomputed over the edited events.
    const readdressed = (edit: (events: Array<{ seq: number; index: number }>) => Array<{ seq: number; index: number }>) => {
      const d = structuredClone(received) as unknown as { events: Array<{ seq: number; index: number }>; events_digest: string }
      d.events = edit(d.events)
      d.events_digest = jcsDigest(d.events)
      return verifyExport(d).problems
    }
    const last = received.events.length - 1
    expect(readdressed((es) => es.map((e, i) => (i === last ? { ...e, index: e.index + 1 } : e)))).toEqual([
      "the events are not exactly the exported commits' events",
      expect.stringMatching(/index \d+ comes where index \d+ should/)
    ])
    expect(readdressed((es) => [...es, es[last]!])).toEqual(["the events are not exactly the exported commits' events", expect.stringMatching(/index \d+ repeats/)])
    expect(verifyExport({ format: "something else" }).ok).toBe(false)
  })
})

describe("a signed export is evidence against the trust root", () => {
  it("args edited with events_digest recomputed: the signature and the signed proposal both refuse it; unsigned or signed by another key fails under --trust", async () => {
    const dir = mkdtempSync(join(tmpdir(), "wk-kernel-key-"))
    const keyFile = join(dir, "kernel.key.json")
    const publicKey = generateKernelKey(keyFile)
    const key = Either.getOrThrow(readKernelKey(keyFile))
    const trust = { ...trustRootFor([profile]), kernel_keys: [publicKey] }
    const doc = await Effect.runPromise(exportOver({ servers: nats.servers, ...Roles.auditor }, { held: ids["approved"]! }))
    const signed = JSON.parse(JSON.stringify(signDocument(doc, key))) as Record<string, unknown> & { events: Array<{ event: Record<string, unknown> }> }
    expect(verifyExport(signed, trust)).toMatchObject({ ok: true, rooted: true, problems: [] })

    const edited = structuredClone(signed)
    const proposal = edited.events.find((e) => e.event["type"] === "call.proposed")!.event
    proposal["args"] = { ...(proposal["args"] as object), to: "acct-forger" }
    proposal["call_digest"] = callDigest(String(proposal["tool"]), proposal["args"])
    edited["events_digest"] = jcsDigest(edited.events)
    const v = verifyExport(edited, trust)
    expect(v.ok).toBe(false)
    expect(v.problems).toEqual(["the signature does not verify over the document", "the events are not exactly the exported commits' events"])
    expect(v.checks.find((c) => c.name === "signatures")!.violations.map((x) => x.message)).toContain("call.proposed: args are not the signed proposal's args")

    const { signature: _, ...unsigned } = signed
    // Neither the document nor (from this kernel, without a key) its commits are signed.
    expect(verifyExport(unsigned, trust).problems).toContain("the export is not signed and its commits are not all signed by the kernel, and a trust root was given")
    const other = JSON.parse(JSON.stringify(signDocument(doc, { publicKey: Buffer.from(nacl.sign.keyPair.fromSecretKey(forger.secretKey).publicKey).toString("base64"), secretKey: forger.secretKey })))
    expect(verifyExport(other, trust).problems).toEqual([expect.stringMatching(/^the export is signed by .*, not a kernel key of the trust root$/)])
    expect(verifyExport(other)).toMatchObject({ ok: true, rooted: false })
    rmSync(dir, { recursive: true, force: true })
  })
})

describe("the wk audit CLI", () => {
  it("replay (--no-trust: this kernel signs nothing) prints a summary and exits 0 on the real log, 1 on a tampered copy; --json is the machine report", async () => {
    const server = `nats://${nats.servers}`
    const ok = await wk(["audit", "replay", "--server", server, "--no-trust", "--quiet"])
    expect(ok.stdout).toContain("OK: no violations")
    expect(ok.stdout).toMatch(/ok {3}effect-safety/)
    expect(ok.status).toBe(0)
    const json = await wk(["audit", "replay", "--held", ids["approved"]!, "--json", "--no-trust", "--quiet"], { NATS_URL: server })
    expect(json.status).toBe(0)
    expect(JSON.parse(json.stdout)).toMatchObject({ ok: true, held_calls: 1, selection: { held: ids["approved"] } })
    const original = await readAll(kernelConn)
    const stream = await copyStream(kernelConn, original, (ms) => ms.filter((m) => !(m.subject === `wk.v1.events.${ids["approved"]}` && m.body["type"] === "attestation.accepted")))
    const bad = await wk(["audit", "replay", "--server", server, "--user", "kernel", "--pass", "kernel-dev", "--stream", stream, "--no-projection", "--no-trust", "--quiet"])
    expect(bad.stdout).toContain("FAIL effect-safety")
    expect(bad.status).toBe(1)
  })

  it("an unknown --held is an error naming it, not an OK", async () => {
    const r = await wk(["audit", "replay", "--server", `nats://${nats.servers}`, "--held", "h_0000000000000000000000000000dead", "--quiet"])
    expect(r.stderr).toContain("no such held call: h_0000000000000000000000000000dead")
    expect(r.stdout).not.toContain("OK")
    expect(r.status).not.toBe(0)
  })

  it("--trust anchors the registry; a root without kernel keys, or no root, is UNVERIFIED (exit 1) unless --no-trust", async () => {
    const server = `nats://${nats.servers}`
    const file = join(nats.storeDir, "trust.json")
    writeFileSync(file, JSON.stringify(trustRootFor([profile])))
    const anchored = await wk(["audit", "replay", "--server", server, "--trust", file, "--no-projection", "--quiet"])
    expect(anchored.stdout).toContain("registry from: trust root: 2 admin(s)")
    expect(anchored.stderr).not.toContain("UNANCHORED")
    expect(anchored.stdout.trim().split("\n").at(-1)).toMatch(/^UNVERIFIED: the trust root lists no kernel_keys; no anchor \(--anchor\)/)
    expect(anchored.status).toBe(1)
    const bare = await wk(["audit", "replay", "--server", server, "--no-projection", "--quiet"])
    expect(bare.stdout).toContain("OK: no violations")
    expect(bare.stderr).toContain("wk audit: UNANCHORED: no trust root given")
    expect(bare.stdout.trim().split("\n").at(-1)).toMatch(/^UNVERIFIED: no trust root \(--trust\); no anchor \(--anchor\)/)
    expect(bare.status).toBe(1)
    const dev = await wk(["audit", "replay", "--server", server, "--no-trust", "--no-projection", "--quiet"])
    expect(dev.stdout.trim().split("\n").at(-1)).toBe("OK: no violations")
    expect(dev.status).toBe(0)
    writeFileSync(file, JSON.stringify({ format: "wk.trust/1" }))
    const bad = await wk(["audit", "replay", "--server", server, "--trust", file, "--quiet"])
    expect(bad.stderr).toContain(`read ${file}`)
    expect(bad.status).not.toBe(0)
  })

  it("export writes a document that verify accepts; signed with a kernel key (wk audit key), it verifies against a trust root naming that key", async () => {
    const file = join(nats.storeDir, "export.json")
    const ex = await wk(["audit", "export", "--server", `nats://${nats.servers}`, "--held", ids["vetoed"]!, "--out", file])
    expect(ex.status).toBe(0)
    const v = await wk(["audit", "verify", "--file", file])
    expect(v.stdout).toContain("UNANCHORED")
    expect(v.stdout).toContain("OK: the export verifies")
    expect(v.status).toBe(0)
    const keyFile = join(nats.storeDir, "kernel.key.json")
    const key = await wk(["audit", "key", "--out", keyFile])
    expect(key.status).toBe(0)
    const trustFile = join(nats.storeDir, "trust-with-key.json")
    writeFileSync(trustFile, JSON.stringify({ ...trustRootFor([profile]), kernel_keys: [key.stdout.trim()] }))
    expect((await wk(["audit", "verify", "--file", file, "--trust", trustFile])).status).toBe(1)
    const signed = join(nats.storeDir, "export-signed.json")
    expect((await wk(["audit", "export", "--server", `nats://${nats.servers}`, "--held", ids["vetoed"]!, "--out", signed, "--sign-with", keyFile])).status).toBe(0)
    const anchored = await wk(["audit", "verify", "--file", signed, "--trust", trustFile])
    expect(anchored.stdout).not.toContain("UNANCHORED")
    expect(anchored.status).toBe(0)
  })
})
