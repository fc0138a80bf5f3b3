import { expect } from "vitest"
import { Clock, Effect, Fiber } from "effect"
import { randomBytes } from "node:crypto"
import { HeldCallStore } from "../../runtime/ledger/HeldCallStore.js"
import { HeldIds } from "../../runtime/protocol/HeldIds.js"
import { propose } from "../../runtime/protocol/Propose.js"
import { attest } from "../../runtime/protocol/Attest.js"
import { runController } from "../../runtime/loops/Controller.js"
import { presencePass } from "../../runtime/loops/PresenceWatch.js"
import { canonicalCall, initialFacts, quiescent } from "../../runtime/heldcall/Facts.js"
import { callDigest } from "../../runtime/schema/Canonical.js"
import { signEnvelope } from "../../runtime/schema/EnvelopeSignature.js"
import { devKeyPair } from "../../runtime/client/DevKeys.js"
import type { HeldCallFacts } from "../../runtime/schema/Facts.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { testProfile } from "../support/Principals.js"
import { FakeTool } from "./FakeTool.js"
import type { Backend } from "./Backend.js"

/** The tools of the suite (names the tests' tool service may serve on NATS) and who may call them. */
export const Tools = { allow: "fs_write", held: "human_op", lost: "deploy", down: "http_post", crash: "crm_update" } as const

export const loopProfiles: ReadonlyArray<Profile> = [
  testProfile({
    grants: { "agent:alice": Object.values(Tools) },
    rules: { [Tools.held]: { always_witness: true, contract: { rule: { class: "human" } } } }
  })
]

const Session = "s-loops"
const encoder = new TextEncoder()

const signed = (principal: string, payload: Record<string, unknown>) =>
  encoder.encode(JSON.stringify(signEnvelope({ ...payload, principal }, devKeyPair(principal).secretKey)))

/** The times a test writes are the kernel's clock's (the memory backend's is `TestClock`). */
const proposal = (tool: string, preferences?: Record<string, unknown>, callId = `c-${randomBytes(6).toString("hex")}`) =>
  Effect.map(Clock.currentTimeMillis, (now) => signed("agent:alice", {
    op: "propose",
    session_id: Session,
    turn_id: "t1",
    call_id: callId,
    tool,
    args: { path: "/tmp/x", amount: 1 },
    nonce: randomBytes(12).toString("hex"),
    expires_at: new Date(now + 5 * 60_000).toISOString(),
    ...(preferences !== undefined ? { preferences } : {})
  }))

const approval = (f: HeldCallFacts) =>
  Effect.map(Clock.currentTimeMillis, (now) => signed("user:carol", {
    op: "attest",
    class: "human",
    held_id: f.held_id,
    generation: f.generation,
    call_digest: canonicalCall(f)!.call_digest,
    contract_digest: f.witness_request!.contract_digest,
    decision: "approve",
    issued_at: new Date(now).toISOString(),
    expires_at: new Date(now + 10 * 60_000).toISOString(),
    nonce: randomBytes(12).toString("hex")
  }))

const heldIdOf = (reply: unknown): string => {
  const id = (reply as { held_id?: unknown }).held_id
  if (typeof id !== "string") throw new Error(`no held id in ${JSON.stringify(reply)}`)
  return id
}

const factsOf = (heldId: string) =>
  Effect.flatMap(HeldCallStore, (s) => s.load(heldId, "fresh")).pipe(Effect.map((l) => l?.facts ?? null))

const seenPrefix = (f: HeldCallFacts, type: string) => f.seen.filter((id) => id.startsWith(`${type}:`)).length

/**
 * The loops (driver, controller, executor) over the ledger ports, written once and run on each
 * backend: outcomes are read from the held call's facts, effects from the tool's own count.
 */
export const loopSuite = (b: Backend) => {
  /** The call once it ended and its result reached the agent (in the reply, or delivered at least once). */
  const settledCall = (heldId: string, budgetMs: number) =>
    b.eventually(Effect.map(factsOf(heldId), (f) => (f !== null && f.outcome !== null && (quiescent(f) || f.delivery_attempts > 0) ? f : undefined)), budgetMs).pipe(
      Effect.tapError(() => Effect.map(factsOf(heldId), (f) => console.error(`${heldId} did not settle:`, JSON.stringify(f, null, 1))))
    )

  b.test("the store appends only on the call's last sequence, and an event id once", {}, Effect.gen(function* () {
    const store = yield* HeldCallStore
    const heldId = `h_${randomBytes(16).toString("hex")}`
    const now = yield* Clock.currentTimeMillis
    const proposed = (generation: number) => ({
      type: "call.proposed" as const,
      event_id: `call.proposed:${heldId}:g${generation}`,
      held_id: heldId,
      generation,
      at: new Date(now).toISOString(),
      principal: "agent:alice",
      session_id: Session,
      turn_id: "t1",
      call_id: `c${generation}`,
      tool: Tools.allow,
      args: { n: generation },
      call_digest: callDigest(Tools.allow, { n: generation }),
      idempotency_key: `${heldId}:g${generation}`,
      created_at: new Date(now).toISOString(),
      expires_at: new Date(now + 60_000).toISOString()
    })
    expect(yield* store.load(heldId)).toBeNull()
    const empty = { facts: initialFacts(heldId), revision: 0 }
    const first = yield* store.append(empty, [proposed(1)])
    expect(first.facts.generation).toBe(1)
    // A writer whose view is behind (it read before the first append) conflicts.
    const stale = yield* Effect.flip(store.append(empty, [proposed(2)]))
    expect(stale._tag).toBe("AppendConflict")
    // The same cause appended again is stored once: the repeat is a conflict, the facts unchanged.
    const again = yield* Effect.flip(store.append(first, [proposed(1)]))
    expect(again._tag).toBe("AppendConflict")
    const loaded = (yield* store.load(heldId, "fresh"))!
    expect(loaded.facts.last_seq).toBe(first.facts.last_seq)
    expect(loaded.facts.seen).toEqual([`call.proposed:${heldId}:g1`])
    expect((yield* store.replay(heldId))?.last_seq).toBe(first.facts.last_seq)
  }))

  b.test("an ALLOW call commits and executes once", {}, Effect.gen(function* () {
    const tool = new FakeTool(Tools.allow)
    yield* b.serve(tool)
    yield* runController()
    const reply = (yield* propose(yield* proposal(tool.name))) as { status: number; outcome?: unknown }
    expect(reply.status).toBe(200)
    expect(reply.outcome).toBe("completed")
    const f = yield* settledCall(heldIdOf(reply), 5_000)
    expect(f.outcome).toBe("completed")
    expect(f.effect?.ok).toBe(true)
    expect(f.dispatch_attempts).toBe(1)
    expect(tool.invocations).toBe(1)
    expect(tool.effects).toBe(1)
    // Folding the call's events again gives the same facts.
    expect(yield* Effect.flatMap(HeldCallStore, (s) => s.replay(f.held_id))).toEqual(f)
  }))

  let paused = false
  b.test("a held call parks; the wake after an approval releases it", { executorPaused: () => paused }, Effect.gen(function* () {
    paused = false
    const tool = new FakeTool(Tools.held)
    yield* b.serve(tool)
    yield* runController()
    const reply = (yield* propose(yield* proposal(tool.name))) as { status: number }
    expect(reply.status).toBe(202)
    const heldId = heldIdOf(reply)
    const parked = (yield* factsOf(heldId))!
    expect(parked.held).toBe(true)
    expect(parked.outcome).toBeNull()
    expect(tool.invocations).toBe(0)
    // The approval's own drive finds the executor paused: only the durable wake can release the call.
    paused = true
    const attested = (yield* attest(yield* approval(parked))) as { status: number; disposition: string }
    expect(attested.disposition).toBe("accepted")
    yield* b.eventually(Effect.map(factsOf(heldId), (f) => (f !== null && seenPrefix(f, "attestation.accepted") === 1 ? f : undefined)), 2_000)
    expect(tool.invocations).toBe(0)
    paused = false
    const f = yield* settledCall(heldId, 10_000)
    expect(f.outcome).toBe("completed")
    expect(tool.effects).toBe(1)
    expect(tool.invocations).toBe(1)
    expect(f.delivery_attempts).toBeGreaterThanOrEqual(1)
  }))

  b.test("a parked call proposed with cancel_on_disconnect is cancelled once its session is gone", {}, Effect.gen(function* () {
    const tool = new FakeTool(Tools.held)
    yield* b.serve(tool)
    yield* runController()
    const disconnect = yield* b.connectSession(Session)
    const reply = (yield* propose(yield* proposal(tool.name, { cancel_on_disconnect: true }))) as { status: number }
    expect(reply.status).toBe(202)
    const heldId = heldIdOf(reply)
    yield* presencePass
    expect((yield* factsOf(heldId))?.lifecycle).toBe("open")
    yield* disconnect
    yield* presencePass
    const f = yield* settledCall(heldId, 5_000)
    expect(f.outcome).toBe("cancelled")
    expect(tool.invocations).toBe(0)
  }))

  b.test("a lost tool reply goes to read-back and settles with one effect", {}, Effect.gen(function* () {
    const tool = new FakeTool(Tools.lost)
    tool.loseReplies = 1
    yield* b.serve(tool)
    yield* runController()
    const reply = yield* propose(yield* proposal(tool.name, { wait: { mode: "background" } }))
    const f = yield* settledCall(heldIdOf(reply), 15_000)
    expect(f.outcome).toBe("completed")
    expect(seenPrefix(f, "effect.outcome_unknown")).toBe(1)
    expect(seenPrefix(f, "effect.readback")).toBe(1)
    expect(f.effect?.ok).toBe(true)
    expect(tool.effects).toBe(1)
    expect(tool.invocations).toBe(1)
    expect(f.delivery_attempts).toBeGreaterThanOrEqual(1)
  }))

  b.test("a lost reply, then the tool down at read-back: read-back is asked again with backoff until it is back; one effect", {}, Effect.gen(function* () {
    const tool = new FakeTool(Tools.lost)
    tool.loseReplies = 1
    tool.downAfterLostReply = true
    yield* b.serve(tool)
    yield* runController()
    const heldId = heldIdOf(yield* propose(yield* proposal(tool.name, { wait: { mode: "background" } })))
    const waiting = yield* b.eventually(Effect.map(factsOf(heldId), (f) => (f !== null && (f.readback_unreached?.attempts ?? 0) >= 2 ? f : undefined)), 15_000)
    expect(waiting).toMatchObject({ execution: "outcome-unknown", needs_witness: false })
    tool.down = false
    const f = yield* settledCall(heldId, 60_000)
    expect(f.outcome).toBe("completed")
    expect(f.needs_witness).toBe(false)
    expect(seenPrefix(f, "effect.readback_unreached")).toBeGreaterThanOrEqual(2)
    expect(seenPrefix(f, "effect.readback")).toBe(1)
    expect(f.effect?.ok).toBe(true)
    expect(tool.effects).toBe(1)
    expect(tool.invocations).toBe(1)
  }))

  b.test("no responders: retried with backoff until the call expires, no effect", {}, Effect.gen(function* () {
    const reply = yield* propose(yield* proposal(Tools.down, { wait: { mode: "background" }, expires_in_ms: 4_000 }))
    yield* runController()
    const heldId = heldIdOf(reply)
    const f = yield* b.eventually(Effect.map(factsOf(heldId), (f) => (f !== null && f.outcome !== null ? f : undefined)), 12_000)
    expect(f.outcome).toBe("expired")
    expect(f.effect).toBeNull()
    // 0.5 s, 1 s, 2 s between attempts: at least three dispatches reached no one within 4 s.
    expect(f.unreached?.attempts ?? 0).toBeGreaterThanOrEqual(3)
    expect(seenPrefix(f, "effect.unreached")).toBe(f.unreached?.attempts)
  }))

  b.test("a crash between the commit and the effect is recovered by the wake", {}, Effect.gen(function* () {
    const tool = new FakeTool(Tools.crash)
    tool.hangInvokes = 1
    yield* b.serve(tool)
    yield* runController()
    const callId = `c-${randomBytes(6).toString("hex")}`
    const heldId = (yield* HeldIds).of({ principal: "agent:alice", session_id: Session, turn_id: "t1", call_id: callId }).heldId
    // The proposal drives the call inline; its dispatch hangs at the tool and its fiber is dropped.
    const inline = yield* Effect.fork(propose(yield* proposal(tool.name, undefined, callId)))
    yield* b.eventually(Effect.sync(() => (tool.invocations === 1 ? true : undefined)), 5_000)
    yield* Fiber.interrupt(inline)
    const claimed = (yield* factsOf(heldId))!
    expect(claimed.execution).toBe("dispatched")
    expect(tool.effects).toBe(0)
    const f = yield* settledCall(heldId, 30_000)
    expect(f.outcome).toBe("completed")
    expect(f.effect?.ok).toBe(true)
    // Recovery found a dispatch without a record: unknown, read back (not applied), sent again under the same key.
    expect(seenPrefix(f, "effect.outcome_unknown")).toBe(1)
    expect(seenPrefix(f, "effect.readback")).toBe(1)
    expect(f.dispatch_attempts).toBe(2)
    expect(tool.invocations).toBe(2)
    expect(tool.effects).toBe(1)
  }))
}
