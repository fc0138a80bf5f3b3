import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Effect, Layer, ManagedRuntime } from "effect"
import { randomBytes } from "node:crypto"
import { layerNats, Nats } from "../../runtime/ledger/Nats.js"
import { provision } from "../../runtime/ledger/Provision.js"
import { appendEvent, appendEvents, readEventsAfter } from "../../runtime/ledger/EventLog.js"
import { HeldCallStore, layerHeldCallStore, type Loaded } from "../../runtime/ledger/HeldCallStore.js"
import { initialFacts } from "../../runtime/heldcall/Facts.js"
import { reduce } from "../../runtime/heldcall/Reducer.js"
import { commitDigest, commitSignatureValid, decodeCommitBytes } from "../../runtime/schema/Commit.js"
import { CommitSigningKey } from "../../runtime/ledger/CommitSigningKey.js"
import { makeHeldCallStore } from "../../runtime/ledger/HeldCallStore.js"
import { readKernelKey, generateKernelKey } from "../../runtime/ledger/KernelKey.js"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Either } from "effect"
import type { HeldEvent } from "../../runtime/schema/Events.js"
import { Streams, Subjects } from "../../runtime/schema/Subjects.js"
import { Roles, startTestNats, type TestNats } from "../support/TestNats.js"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel } from "../support/InProcessKernel.js"
import { eventsOf, eventually } from "../support/Stream.js"
import { HeldId as FixtureHeldId, adjudicated, attestation, held, proposed, sequenced } from "../heldcall/Given.js"

/** Commits against a real nats-server: the events of one append are one stream message. */

let nats: TestNats
let rt: ManagedRuntime.ManagedRuntime<Nats | HeldCallStore, unknown>

beforeAll(async () => {
  nats = await startTestNats()
  rt = ManagedRuntime.make(layerHeldCallStore.pipe(Layer.provideMerge(layerNats({ servers: nats.servers, ...Roles.kernel, name: "commit-test" }))))
  await rt.runPromise(provision())
})

afterAll(async () => {
  await rt?.dispose()
  await nats?.dispose()
})

const newHeldId = () => "h_" + randomBytes(16).toString("hex")
const forCall = <E extends HeldEvent>(heldId: string, e: E): E => ({ ...e, held_id: heldId, event_id: e.event_id.replace(FixtureHeldId, heldId) })
const story = (heldId: string): ReadonlyArray<HeldEvent> =>
  [
    proposed(1),
    adjudicated(1),
    held(1),
    attestation({ witness: "user:carol", decision: "approve", issued: 100 }),
    attestation({ witness: "user:dave", decision: "approve", issued: 101 })
  ].map((e) => forCall(heldId, e))

/** Every stored message on a call's subject, decoded as a commit. */
const storedCommits = (heldId: string) =>
  Effect.gen(function* () {
    const { jsm } = yield* Nats
    return yield* Effect.promise(async () => {
      const out: Array<{ seq: number; commit: ReturnType<typeof decodeCommitBytes>; data: Uint8Array }> = []
      for (let seq = 1; ; ) {
        const m = await jsm.direct.getMessage(Streams.events, { next_by_subj: Subjects.events(heldId), seq })
        if (m === null) return out
        out.push({ seq: m.seq, commit: decodeCommitBytes(m.data), data: m.data })
        seq = m.seq + 1
      }
    })
  })

const fresh = (heldId: string): Loaded => ({ facts: initialFacts(heldId), revision: 0 })

describe("a commit", () => {
  it("holds the N events of one append as one stream message, indexed 0..N-1, and folds to the same facts as one event per append", async () => {
    const heldId = newHeldId()
    const events = story(heldId)
    const loaded = await rt.runPromise(Effect.flatMap(HeldCallStore, (s) => s.append(fresh(heldId), events)))
    const commits = await rt.runPromise(storedCommits(heldId))
    expect(commits).toHaveLength(1)
    expect(commits[0]!.commit).toEqual({ commit_id: events[0]!.event_id, held_id: heldId, prev: "", events })
    expect(loaded.facts.last_seq).toBe(commits[0]!.seq)

    const read = await rt.runPromise(readEventsAfter(heldId, 0))
    expect(read.map((e) => [e.seq, e.index, e.event.event_id])).toEqual(events.map((e, i) => [commits[0]!.seq, i, e.event_id]))
    // The same events one per append fold to the same facts but for the sequence they end at.
    const apart = reduce(heldId, sequenced(events))
    expect({ ...loaded.facts, last_seq: 0 }).toEqual({ ...apart, last_seq: 0 })
    const reloaded = await rt.runPromise(Effect.flatMap(HeldCallStore, (s) => s.replay(heldId)))
    expect(reloaded).toEqual(loaded.facts)
  })

  it("on a stale expected sequence stores none of its events (atomic), and the retry on current facts stores them all", async () => {
    const heldId = newHeldId()
    const [first, ...rest] = story(heldId)
    const store = await rt.runPromise(HeldCallStore)
    const one = await rt.runPromise(store.append(fresh(heldId), [first!]))
    // Written on top of a view that has not seen the first commit: a conflict, nothing stored.
    const stale = await rt.runPromise(Effect.flip(store.append(fresh(heldId), rest)))
    expect(stale._tag).toBe("AppendConflict")
    expect((await rt.runPromise(readEventsAfter(heldId, 0))).map((e) => e.event.event_id)).toEqual([first!.event_id])
    const two = await rt.runPromise(store.append(one, rest))
    const commits = await rt.runPromise(storedCommits(heldId))
    expect(commits.map((c) => c.commit.events.length)).toEqual([1, rest.length])
    expect(two.facts.last_seq).toBe(commits[1]!.seq)
  })

  it("committed twice under one commit id is stored once; the second is a conflict", async () => {
    const heldId = newHeldId()
    const events = story(heldId).slice(0, 3)
    const store = await rt.runPromise(HeldCallStore)
    await rt.runPromise(store.append(fresh(heldId), events))
    // The same decision sent again on the sequence it expected then (a writer whose ack was lost).
    const again = await rt.runPromise(Effect.flip(Effect.flatMap(Nats, (nats) => appendEvents(nats, events, 0))))
    expect(again._tag).toBe("AppendConflict")
    expect(await rt.runPromise(storedCommits(heldId))).toHaveLength(1)
  })

  it("cannot hold an event of another held call", async () => {
    const a = newHeldId()
    const b = newHeldId()
    const mixed = [forCall(a, proposed(1)), forCall(b, adjudicated(1))]
    const exit = await rt.runPromiseExit(Effect.flatMap(HeldCallStore, (s) => s.append(fresh(a), mixed)))
    expect(exit._tag).toBe("Failure")
    expect(await rt.runPromise(storedCommits(a))).toEqual([])
    // appendEvent, one event per commit, keeps working.
    const seq = await rt.runPromise(appendEvent(forCall(b, proposed(1)), 0))
    expect((await rt.runPromise(storedCommits(b))).map((c) => [c.seq, c.commit.events.length])).toEqual([[seq, 1]])
  })
})

describe("a call's chain of commits", () => {
  it("each commit names the digest of the previous one's stored bytes, whether the writer's view came from its own append, a read of the stream, or the projection alone", async () => {
    const heldId = newHeldId()
    const [a, b, c, d, e] = story(heldId)
    const store = await rt.runPromise(HeldCallStore)
    const one = await rt.runPromise(store.append(fresh(heldId), [a!, b!]))
    await rt.runPromise(store.append(one, [c!]))
    // Another process: its view comes from the stream (head read with the events).
    const other = await rt.runPromise(makeHeldCallStore)
    const loaded = (await rt.runPromise(other.load(heldId)))!
    const three = await rt.runPromise(other.append(loaded, [d!]))
    // A view without the head (as from the KV projection): the store reads the last commit once.
    await rt.runPromise(store.append({ facts: three.facts, revision: 0 }, [e!]))
    const commits = await rt.runPromise(storedCommits(heldId))
    expect(commits.map((x) => x.commit.prev)).toEqual(["", ...commits.slice(0, -1).map((x) => commitDigest(x.data))])
    expect(commits.every((x) => x.commit.sig === undefined && x.commit.key === undefined)).toBe(true)
  })

  it("with the kernel's key, every commit is signed over its canonical form and verifies; an edited event does not", async () => {
    const dir = mkdtempSync(join(tmpdir(), "wk-chain-"))
    try {
      generateKernelKey(join(dir, "kernel.key"))
      const key = Either.getOrThrow(readKernelKey(join(dir, "kernel.key")))
      const heldId = newHeldId()
      const [a, b] = story(heldId)
      const signed = await rt.runPromise(Effect.provideService(makeHeldCallStore, CommitSigningKey, key))
      const one = await rt.runPromise(signed.append(fresh(heldId), [a!]))
      await rt.runPromise(signed.append(one, [b!]))
      const commits = await rt.runPromise(storedCommits(heldId))
      expect(commits.map((x) => [x.commit.key, commitSignatureValid(x.commit)])).toEqual([[key.publicKey, true], [key.publicKey, true]])
      expect(commits[1]!.commit.prev).toBe(commitDigest(commits[0]!.data))
      const edited = { ...commits[1]!.commit, events: [{ ...commits[1]!.commit.events[0], at: "2020-01-01T00:00:00.000Z" }] as typeof commits[1]["commit"]["events"] }
      expect(commitSignatureValid(edited)).toBe(false)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe("commits written by a kernel", () => {
  it("an ALLOW call is two stream messages: proposal, verdict, claim and dispatch; then effect and admission", async () => {
    const kernel = await startKernel(nats.servers, [testProfile()])
    const [tool, agent, k] = await Promise.all([connectAs(nats.servers, "bank"), connectAs(nats.servers, "agent"), connectAs(nats.servers, "kernel")])
    try {
      new DemoBank().serve(tool)
      const reply = (await clientFor(agent, "agent:alice").propose({ session_id: "s-commit", turn_id: "t1", call_id: `c-${randomBytes(4).toString("hex")}`, tool: "money_transfer", args: { from: "a", to: "b", amount: 5 } } as never)) as { status: number; held_id: string }
      expect(reply.status).toBe(200)
      await eventually(async () => (await eventsOf(k, reply.held_id)).some((e) => e.type === "result.admitted"))
      const commits = await rt.runPromise(storedCommits(reply.held_id))
      expect(commits.slice(0, 2).map((c) => c.commit.events.map((e) => e.type))).toEqual([
        ["call.proposed", "call.adjudicated", "execution.leased", "effect.dispatched"],
        ["effect.recorded", "result.admitted"]
      ])
      expect(commits.every((c) => c.commit.held_id === reply.held_id && c.commit.commit_id === c.commit.events[0].event_id)).toBe(true)
    } finally {
      await Promise.all([tool, agent, k].map((c) => c.close()))
      await kernel.stop()
    }
  }, 60_000)
})
