import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { pinOf } from "../support/Pins.js"
import { eventsOf, eventually } from "../support/Stream.js"

// Per-call and user-layer preferences through the kernel over NATS: each one's effect, and
// each one refusing to widen what a layer set.
let nats: TestNats
let kernel: InProcessKernel
let bank: DemoBank
let agentConn: NatsConnection
let witnessConn: NatsConnection
let toolConn: NatsConnection
let kernelConn: NatsConnection
let alice: WitnessClient
let bob: WitnessClient
let carol: WitnessClient

const rules = { money_transfer: { amount_field: "amount", witness_above: 1000, deny_above: 100_000, contract: { rule: { class: "human" } } } }
const org = testProfile({
  rules: {},
  grants: { "agent:alice": ["money_transfer", "pay"], "agent:bob": ["money_transfer", "pay"] },
  plugins: [
    pinOf("tool-alias", { stages: ["transform"], config: { aliases: { pay: "money_transfer" } } }),
    pinOf("spend-limit", { stages: ["adjudicate"], config: { rules } })
  ]
})
// Bob's own layer: always witness money movement, redacted presentations, no tool substitution.
const bobLayer: Profile = {
  name: "bob-prefs",
  layer: "user",
  preferences: {
    "agent:bob": { always_witness: ["money_*"], disclosure: "redacted", transforms: { substitution: "forbid" }, expires_in_ms: 600_000 }
  }
}

let n = 0
const transfer = (amount: number, preferences?: Record<string, unknown>, tool = "money_transfer") => ({
  session_id: "s-prefs",
  turn_id: "t1",
  call_id: `pr${++n}`,
  tool,
  args: { from: `pref-${n}`, to: "shop", amount },
  ...(preferences !== undefined ? { preferences: preferences as never } : {})
})
type Held = { status: 202; held_id: string; call_digest: string; generation: number; witness_request: { contract_digest: string; presentation: Record<string, unknown> } }
const approve = (c: WitnessClient, h: Held) =>
  c.attest({ held_id: h.held_id, class: "human", decision: "approve", generation: h.generation, call_digest: h.call_digest, contract_digest: h.witness_request.contract_digest })

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [org, bobLayer], { config: { presenceIntervalMs: 200 } })
  toolConn = await connectAs(nats.servers, "bank")
  bank = new DemoBank().serve(toolConn)
  agentConn = await connectAs(nats.servers, "agent")
  witnessConn = await connectAs(nats.servers, "witness")
  kernelConn = await connectAs(nats.servers, "kernel")
  alice = clientFor(agentConn, "agent:alice")
  bob = clientFor(agentConn, "agent:bob")
  carol = clientFor(witnessConn, "user:carol")
})

afterAll(async () => {
  await kernel?.stop()
  await Promise.all([agentConn, witnessConn, toolConn, kernelConn].map((c) => c?.close()))
  await nats?.dispose()
})

describe("wait mode", () => {
  it("block: a witness who answers within max_ms turns the reply into the result (200), one effect", async () => {
    const c = transfer(2_000, { wait: { mode: "block", max_ms: 10_000 } })
    const pending = alice.propose(c)
    // The witness sees the hold on held.get while the proposer is still blocked.
    const h = (await eventually(() => witnessRequestFor(c.call_id))) as Held
    expect((await approve(carol, h)).status).toBe(202)
    const reply = await pending
    expect(reply).toMatchObject({ status: 200, outcome: "completed", held_id: h.held_id, result: { amount: 2_000 } })
    expect(bank.invocations.get(`${h.held_id}:g1`) ?? 0).toBe(1)
  })

  it("block: nobody answers within max_ms -> 202 with the witness request after about max_ms", async () => {
    const t0 = Date.now()
    const r = await alice.propose(transfer(3_000, { wait: { mode: "block", max_ms: 600 } }))
    const took = Date.now() - t0
    expect(r).toMatchObject({ status: 202, outcome: "held" })
    expect(took).toBeGreaterThanOrEqual(550)
  })

  it("background: an ALLOW is answered 202 at once and its result arrives on the session", async () => {
    const c = transfer(5, { wait: { mode: "background" } })
    const r = (await alice.propose(c)) as { status: number; outcome: string; held_id: string }
    expect(r).toMatchObject({ status: 202, outcome: "accepted" })
    const delivered = await alice.result(r.held_id, { sessionId: c.session_id, timeoutMs: 10_000 })
    expect(delivered).toMatchObject({ held_id: r.held_id, outcome: "completed", result: { amount: 5 } })
    expect(bank.invocations.get(`${r.held_id}:g1`) ?? 0).toBe(1)
  })

  it("cancel_on_disconnect: a parked call is cancelled by the kernel when its session's connection closes", async () => {
    const conn = await connectAs(nats.servers, "agent")
    const gone = clientFor(conn, "agent:alice")
    const c = { ...transfer(4_000, { cancel_on_disconnect: true }), session_id: "s-leaving" }
    const h = (await gone.propose(c)) as Held
    expect(h.status).toBe(202)
    const stays = { ...transfer(4_100, { cancel_on_disconnect: true }), session_id: "s-staying" }
    const kept = (await alice.propose(stays)) as Held
    // Still open while the connection lives (several presence passes).
    await new Promise((r) => setTimeout(r, 700))
    expect((await alice.get(h.held_id)).held).toMatchObject({ lifecycle: "open" })
    await conn.close()
    await eventually(async () => ((await alice.get(h.held_id)).held as Record<string, unknown>)["lifecycle"] === "cancelled", 10_000)
    const cancelled = (await eventsOf(kernelConn, h.held_id)).find((e) => e.type === "call.cancelled") as Record<string, unknown>
    expect(cancelled).toMatchObject({ by: "kernel", reason: "session s-leaving disconnected (cancel_on_disconnect)" })
    expect((await alice.get(kept.held_id)).held).toMatchObject({ lifecycle: "open" })
    expect(bank.invocations.get(`${h.held_id}:g1`) ?? 0).toBe(0)
  })
})

describe("scope, route, timeout, transforms, disclosure", () => {
  it("require_witness holds a call policy would allow; a user layer's always_witness does the same for every matching call", async () => {
    expect(await alice.propose(transfer(10))).toMatchObject({ status: 200 })
    expect(await alice.propose(transfer(10, { require_witness: true }))).toMatchObject({ status: 202, outcome: "held" })
    const h = (await bob.propose(transfer(10))) as Held
    expect(h).toMatchObject({ status: 202 })
    // An unsigned held.get answers the witness view, which hides reasons under redacted disclosure;
    // the recorded verdict carries the preference's reason.
    const reasons = (await eventsOf(kernelConn, h.held_id)).flatMap((e) => ("reasons" in e && Array.isArray(e.reasons) ? e.reasons : []))
    expect(reasons).toEqual(expect.arrayContaining([expect.objectContaining({ by: "preferences", reason: "calls matching 'money_*' always need a witness" })]))
  })

  it("witness_route: a preference-caused hold waits on the route the caller names", async () => {
    const h = (await alice.propose(transfer(20, { require_witness: true, witness_route: { principal: "user:dave" } }))) as Held & { witness_request: { contract: unknown } }
    expect(h.witness_request.contract).toMatchObject({ rule: { class: "human" }, route: { principal: "user:dave" } })
    // carol is human but not the named route: not enough.
    await approve(carol, h)
    expect((await alice.get(h.held_id)).held).toMatchObject({ lifecycle: "open", readiness: "unsatisfied" })
  })

  it("disclosure redacted: the witness sees value types, not values, and still binds to the exact call digest", async () => {
    const c = transfer(2_500)
    const h = (await bob.propose(c)) as Held
    expect(h.witness_request.presentation).toMatchObject({ disclosure: "redacted", args: { from: "[redacted string]", to: "[redacted string]", amount: "[redacted number]" }, call_digest: h.call_digest })
    const exact = (await alice.propose(transfer(2_600))) as Held
    expect(exact.witness_request.presentation).toMatchObject({ disclosure: "exact", args: { amount: 2_600 } })
  })

  it("transforms: substitution forbidden denies the aliased call; preview holds it; the default runs it", async () => {
    expect(await alice.propose(transfer(30, undefined, "pay"))).toMatchObject({ status: 200, executed: { tool: "money_transfer" } })
    expect(await alice.propose(transfer(31, { transforms: { substitution: "preview" } }, "pay"))).toMatchObject({ status: 202, outcome: "held" })
    const denied = await alice.propose(transfer(32, { transforms: { substitution: "forbid" } }, "pay"))
    expect(denied).toMatchObject({ status: 403, outcome: "denied" })
    expect(JSON.stringify(denied)).toContain("tool substitution is forbidden")
    expect(await bob.propose(transfer(33, undefined, "pay"))).toMatchObject({ status: 403 })
  })

  it("a per-call expires_in_ms shortens the hold: the call expires", async () => {
    const h = (await alice.propose(transfer(2_700, { expires_in_ms: 400 }))) as Held
    await eventually(async () => ((await alice.get(h.held_id)).held as Record<string, unknown>)["lifecycle"] === "expired", 10_000)
  })
})

describe("per-call preferences only narrow", () => {
  const refused = async (who: WitnessClient, preferences: Record<string, unknown>, path: string) => {
    const before = bank.effects
    const r = (await who.propose(transfer(10, preferences))) as { status: number; error: { path: string; message: string } }
    expect(r.status).toBe(400)
    expect(r.error.path).toBe(path)
    expect(r.error.message).toContain("bob-prefs")
    expect(bank.effects).toBe(before)
  }
  it("looser than the user layer: disclosure, substitution, a longer timeout -> 400 naming the field and the layer", async () => {
    await refused(bob, { disclosure: "exact" }, "payload.preferences.disclosure")
    await refused(bob, { transforms: { substitution: "allow" } }, "payload.preferences.transforms.substitution")
    await refused(bob, { expires_in_ms: 700_000 }, "payload.preferences.expires_in_ms")
  })
  it("unknown keys and out-of-range waits are refused by the schema", async () => {
    expect(await alice.propose(transfer(10, { wait: { mode: "block", max_ms: 60_000 } }))).toMatchObject({ status: 400, error: { path: "payload.preferences.wait.max_ms" } })
    expect(await alice.propose(transfer(10, { transforms: { substitution: "allow", anything: "auto" } }))).toMatchObject({ status: 400, error: { path: "payload.preferences.transforms.anything" } })
  })
})

/** The held reply for a call_id of this file's session, once the kernel has parked it (found in the open-calls index: ids are not derivable). */
const witnessRequestFor = async (callId: string) => {
  const { Kvm } = await import("@nats-io/kv")
  const { Buckets } = await import("../../runtime/schema/Subjects.js")
  const open = await new Kvm(kernelConn).open(Buckets.open)
  for await (const id of await open.keys()) {
    const r = (await alice.get(id).catch(() => null)) as { status: number; held?: Record<string, unknown> } | null
    const f = r?.held
    if (r === null || r.status !== 200 || f === undefined || f["call_id"] !== callId || f["witness_request"] === null || f["witness_request"] === undefined) continue
    return { status: 202, held_id: id, call_digest: f["call_digest"], generation: f["generation"], witness_request: f["witness_request"] }
  }
  return null
}
