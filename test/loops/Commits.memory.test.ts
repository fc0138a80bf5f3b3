import { expect } from "vitest"
import { it } from "@effect/vitest"
import { Clock, Effect, Layer, TestClock } from "effect"
import { randomBytes } from "node:crypto"
import { HeldCallStore } from "../../runtime/ledger/HeldCallStore.js"
import { layerMemoryLedger } from "../../runtime/ledger/memory/MemoryLedger.js"
import { MemoryTools } from "../../runtime/ledger/memory/MemoryToolClient.js"
import { layerMemoryPolicyStore } from "../../runtime/policy/MemoryPolicyStore.js"
import { propose } from "../../runtime/protocol/Propose.js"
import { attest } from "../../runtime/protocol/Attest.js"
import { canonicalCall } from "../../runtime/heldcall/Facts.js"
import { signEnvelope } from "../../runtime/schema/EnvelopeSignature.js"
import { devKeyPair } from "../../runtime/client/DevKeys.js"
import type { HeldCallFacts } from "../../runtime/schema/Facts.js"
import { layerLoops, layerNoNats } from "./Backend.js"
import { loopProfiles, Tools } from "./LoopSuite.js"

// One commit per decision, read from the store's appends: which events each append carried, in order.
// Time is TestClock's: the kernel and the requests below read it from Effect's `Clock`.
const Origin = Date.parse("2026-06-01T00:00:00.000Z")

const commits: Array<{ readonly heldId: string; readonly types: ReadonlyArray<string> }> = []
const commitsOf = (heldId: string) => commits.filter((c) => c.heldId === heldId).map((c) => c.types)

/** The memory store, recording every append that succeeded. */
const layerRecordingStore = Layer.effect(
  HeldCallStore,
  Effect.map(HeldCallStore, (inner) =>
    HeldCallStore.of({
      ...inner,
      append: (loaded, events) => Effect.tap(inner.append(loaded, events), () => Effect.sync(() => void commits.push({ heldId: loaded.facts.held_id, types: events.map((e) => e.type) })))
    })
  )
)

const ledger = Layer.mergeAll(Layer.provideMerge(layerRecordingStore, layerMemoryLedger), layerMemoryPolicyStore(loopProfiles), layerNoNats)
const kernel = layerLoops(ledger, { executorPaused: () => false })

const encoder = new TextEncoder()
const signed = (principal: string, payload: Record<string, unknown>) => encoder.encode(JSON.stringify(signEnvelope({ ...payload, principal }, devKeyPair(principal).secretKey)))
const proposal = (tool: string) =>
  Effect.map(Clock.currentTimeMillis, (now) => signed("agent:alice", { op: "propose", session_id: "s-commits", turn_id: "t1", call_id: `c-${randomBytes(6).toString("hex")}`, tool, args: { path: "/tmp/x", amount: 1 }, nonce: randomBytes(12).toString("hex"), expires_at: new Date(now + 5 * 60_000).toISOString() }))
const approval = (f: HeldCallFacts) =>
  Effect.map(Clock.currentTimeMillis, (now) => signed("user:carol", { op: "attest", class: "human", held_id: f.held_id, generation: f.generation, call_digest: canonicalCall(f)!.call_digest, contract_digest: f.witness_request!.contract_digest, decision: "approve", issued_at: new Date(now).toISOString(), expires_at: new Date(now + 10 * 60_000).toISOString(), nonce: randomBytes(12).toString("hex") }))

const serveEcho = (name: string) =>
  Effect.flatMap(MemoryTools, (tools) => Effect.sync(() => tools.serve(name, { invoke: () => Effect.succeed({ ok: true as const, result: { done: true } }) })))

/** Lets the forked drive of a handler run to its end. */
const settle = (heldId: string, done: (f: HeldCallFacts) => boolean) =>
  Effect.gen(function* () {
    const store = yield* HeldCallStore
    for (let i = 0; i < 200; i++) {
      const l = yield* store.load(heldId, "fresh")
      if (l !== null && done(l.facts)) return l.facts
      yield* Effect.promise(() => new Promise<void>((r) => setImmediate(r)))
    }
    throw new Error(`${heldId} did not settle`)
  })

it.scoped("an ALLOW call is two commits: proposal, verdict, claim and dispatch; then effect and admission", () =>
  Effect.gen(function* () {
    yield* TestClock.setTime(Origin)
    yield* serveEcho(Tools.allow)
    const reply = (yield* propose(yield* proposal(Tools.allow))) as { status: number; held_id: string }
    expect(reply.status).toBe(200)
    expect(commitsOf(reply.held_id)).toEqual([
      ["call.proposed", "call.adjudicated", "execution.leased", "effect.dispatched"],
      ["effect.recorded", "result.admitted"]
    ])
  }).pipe(Effect.provide(kernel))
)

it.scoped("a held release is two commits (acceptance, readiness, claim and dispatch; effect and admission), then the delivery's record", () =>
  Effect.gen(function* () {
    yield* TestClock.setTime(Origin)
    yield* serveEcho(Tools.held)
    const reply = (yield* propose(yield* proposal(Tools.held))) as { status: number; held_id: string }
    expect(reply.status).toBe(202)
    const held = commitsOf(reply.held_id)
    expect(held).toHaveLength(1)
    expect(held[0]!.slice(0, 3)).toEqual(["call.proposed", "call.adjudicated", "call.held"])
    const parked = (yield* (yield* HeldCallStore).load(reply.held_id, "fresh"))!.facts
    const attested = (yield* attest(yield* approval(parked))) as unknown as { disposition: string }
    expect(attested.disposition).toBe("accepted")
    yield* settle(reply.held_id, (f) => f.delivery_attempts > 0)
    expect(commitsOf(reply.held_id).slice(1)).toEqual([
      ["attestation.accepted", "readiness.changed", "execution.leased", "effect.dispatched"],
      ["effect.recorded", "result.admitted"],
      ["delivery.published"]
    ])
  }).pipe(Effect.provide(kernel))
)
