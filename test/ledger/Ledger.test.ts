import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Effect, Layer, ManagedRuntime } from "effect"
import { randomBytes } from "node:crypto"
import { Kvm } from "@nats-io/kv"
import { jetstreamManager } from "@nats-io/jetstream"
import { layerNats, Nats } from "../../runtime/ledger/Nats.js"
import { provision } from "../../runtime/ledger/Provision.js"
import { appendEvent, readEventsAfter } from "../../runtime/ledger/EventLog.js"
import { HeldCallStore, makeHeldCallStore, type Loaded } from "../../runtime/ledger/HeldCallStore.js"
import { layerNatsLedger, type LedgerPorts } from "../../runtime/ledger/LedgerPorts.js"
import { readProjection, writeProjection } from "../../runtime/ledger/Projection.js"
import { acquireLease, releaseLease, type Lease } from "../../runtime/ledger/Leases.js"
import { initialFacts } from "../../runtime/heldcall/Facts.js"
import { reduce } from "../../runtime/heldcall/Reducer.js"
import type { HeldEvent } from "../../runtime/schema/Events.js"
import type { HeldCallFacts } from "../../runtime/schema/Facts.js"
import { Buckets, Streams, Subjects } from "../../runtime/schema/Subjects.js"
import { Roles, startTestNats, type TestNats } from "../support/TestNats.js"
import { eventually } from "../support/Stream.js"
import { HeldId as FixtureHeldId, adjudicated, attestation, held, proposed } from "../heldcall/Given.js"

/** The ledger against a real nats-server of its own: stream appends, KV projection, KV leases. */

let nats: TestNats
type Rt = ManagedRuntime.ManagedRuntime<Nats | LedgerPorts, unknown>
/** Two kernel processes' worth of connections (each with its own store and cache). */
let a: Rt
let b: Rt

const runtimeFor = (servers: string, name: string): Rt => {
  const conn = layerNats({ servers, ...Roles.kernel, name })
  return ManagedRuntime.make(layerNatsLedger.pipe(Layer.provideMerge(conn)))
}

beforeAll(async () => {
  nats = await startTestNats()
  a = runtimeFor(nats.servers, "ledger-a")
  b = runtimeFor(nats.servers, "ledger-b")
  await a.runPromise(provision())
})

afterAll(async () => {
  await a?.dispose()
  await b?.dispose()
  await nats?.dispose()
})

const newHeldId = () => "h_" + randomBytes(16).toString("hex")
/** The fixture builders' events, moved to another held call. */
const forCall = <E extends HeldEvent>(heldId: string, e: E): E => ({ ...e, held_id: heldId, event_id: e.event_id.replace(FixtureHeldId, heldId) })
const story = (heldId: string): ReadonlyArray<HeldEvent> => [
  proposed(1),
  adjudicated(1),
  held(1),
  attestation({ witness: "user:carol", decision: "approve", issued: 100 }),
  attestation({ witness: "user:dave", decision: "approve", issued: 101 })
].map((e) => forCall(heldId, e))

const storedOn = (heldId: string) =>
  Effect.gen(function* () {
    const { jsm } = yield* Nats
    const info = yield* Effect.promise(() => jsm.streams.info(Streams.events, { subjects_filter: Subjects.events(heldId) }))
    return info.state.subjects?.[Subjects.events(heldId)] ?? 0
  })

const appendAll = (events: ReadonlyArray<HeldEvent>) =>
  Effect.gen(function* () {
    let last = 0
    for (const e of events) last = yield* appendEvent(e, last)
    return last
  })

describe("event log", () => {
  it("append-once: the same event id twice is one stream message; the second append is an AppendConflict", async () => {
    const h = newHeldId()
    const [e] = story(h)
    const seq = await a.runPromise(appendEvent(e!, 0))
    expect(seq).toBeGreaterThan(0)
    // the same cause again, by a writer whose view is behind (expected 0) and by one that is current
    const behind = await a.runPromise(Effect.flip(appendEvent(e!, 0)))
    expect(behind._tag).toBe("AppendConflict")
    const current = await b.runPromise(Effect.flip(appendEvent(e!, seq)))
    expect(current).toMatchObject({ _tag: "AppendConflict", heldId: h, expected: seq })
    expect(await a.runPromise(storedOn(h))).toBe(1)
    expect((await a.runPromise(readEventsAfter(h, 0))).map((x) => x.event.event_id)).toEqual([e!.event_id])
  })

  it("expected-last-subject-sequence: of two writers at the same sequence exactly one wins; the loser re-reads and retries", async () => {
    const h = newHeldId()
    const [p, adj, hold] = story(h)
    const first = await a.runPromise(appendEvent(p!, 0))
    const results = await Promise.all([a.runPromise(Effect.either(appendEvent(adj!, first))), b.runPromise(Effect.either(appendEvent(hold!, first)))])
    const won = results.filter((r) => r._tag === "Right")
    const lost = results.filter((r) => r._tag === "Left")
    expect(won).toHaveLength(1)
    expect(lost).toHaveLength(1)
    expect(lost[0]!._tag === "Left" && lost[0]!.left._tag).toBe("AppendConflict")
    // the loser re-reads the subject and appends on top
    const loserRuntime = results[0]!._tag === "Left" ? a : b
    const loserEvent = results[0]!._tag === "Left" ? adj! : hold!
    const seen = await loserRuntime.runPromise(readEventsAfter(h, 0))
    const retried = await loserRuntime.runPromise(appendEvent(loserEvent, seen.at(-1)!.seq))
    expect(retried).toBeGreaterThan(seen.at(-1)!.seq)
    expect(await a.runPromise(storedOn(h))).toBe(3)
  })

  it("a sequence of another call's subject never satisfies an expectation (per-subject, not per-stream)", async () => {
    const h1 = newHeldId()
    const h2 = newHeldId()
    const s1 = await a.runPromise(appendEvent(story(h1)[0]!, 0))
    // h2 is new: its last subject sequence is 0 however far the stream has advanced
    expect((await b.runPromise(Effect.flip(appendEvent(story(h2)[0]!, s1))))._tag).toBe("AppendConflict")
    expect(await b.runPromise(appendEvent(story(h2)[0]!, 0))).toBeGreaterThan(s1)
  })

  it("readEventsAfter returns one call's events in stream order, after a given sequence, interleaved with others", async () => {
    const h = newHeldId()
    const other = newHeldId()
    const mine = story(h)
    const theirs = story(other)
    let mySeq = 0
    let theirSeq = 0
    const seqs: Array<number> = []
    for (let i = 0; i < mine.length; i++) {
      mySeq = await a.runPromise(appendEvent(mine[i]!, mySeq))
      seqs.push(mySeq)
      theirSeq = await b.runPromise(appendEvent(theirs[i]!, theirSeq))
    }
    const all = await a.runPromise(readEventsAfter(h, 0))
    expect(all.map((x) => x.event.event_id)).toEqual(mine.map((e) => e.event_id))
    expect(all.map((x) => x.seq)).toEqual(seqs)
    expect((await a.runPromise(readEventsAfter(h, seqs[1]!))).map((x) => x.seq)).toEqual(seqs.slice(2))
    expect(await a.runPromise(readEventsAfter(h, seqs.at(-1)!))).toEqual([])
    expect(await a.runPromise(readEventsAfter(newHeldId(), 0))).toEqual([])
  })
})

describe("HeldCallStore", () => {
  const loadFresh = (heldId: string) => Effect.flatMap(makeHeldCallStore, (store) => store.load(heldId))
  const deleteProjection = (heldId: string) =>
    Effect.flatMap(Nats, ({ kv }) => Effect.promise(async () => (await kv(Buckets.facts)).delete(heldId)))
  const appendNew = (rt: Rt, h: string, events: ReadonlyArray<HeldEvent>) =>
    rt.runPromise(Effect.flatMap(HeldCallStore, (s) => s.append({ facts: initialFacts(h), revision: 0 }, events)))
  /** Projects `loaded` with the store's own (background) projector and waits until the bucket holds it. */
  const projectNow = async (rt: Rt, loaded: Loaded) => {
    await rt.runPromise(Effect.flatMap(HeldCallStore, (s) => s.project(loaded)))
    return eventually(async () => {
      const p = await rt.runPromise(readProjection(loaded.facts.held_id))
      return p !== null && p.facts.last_seq >= loaded.facts.last_seq ? p : undefined
    }, 5000, 10)
  }

  it("append then load round-trips the facts; a fresh store, a replay and the projection agree", async () => {
    const h = newHeldId()
    const store = await a.runPromise(HeldCallStore)
    expect(await a.runPromise(store.load(h))).toBeNull()
    const appended = await a.runPromise(store.append({ facts: initialFacts(h), revision: 0 }, story(h)))
    expect(appended.facts.last_seq).toBeGreaterThan(0)
    expect(appended.facts.evidence).toHaveLength(2)
    expect((await a.runPromise(store.load(h)))?.facts).toEqual(appended.facts)
    // another process (no cache) loads the same facts; replay from the stream alone agrees
    expect((await b.runPromise(loadFresh(h)))?.facts).toEqual(appended.facts)
    expect(await b.runPromise(Effect.flatMap(HeldCallStore, (s) => s.replay(h)))).toEqual(appended.facts)
    // and the projection holds them, with the last folded sequence
    const projected = await projectNow(a, appended)
    expect(projected.facts).toEqual(appended.facts)
    expect(projected.facts.last_seq).toBe(appended.facts.last_seq)
  })

  it("given a projection written meanwhile, when an append decided on the older view commits, then the store keeps the newer revision for the next projection", async () => {
    const h = newHeldId()
    const [p, adj, hold, approve] = story(h)
    const store = await a.runPromise(HeldCallStore)
    const first = await a.runPromise(store.append({ facts: initialFacts(h), revision: 0 }, [p!, adj!, hold!]))
    const projected = await projectNow(a, first)
    // the store learned the bucket's revision once its write was acknowledged
    await eventually(async () => (store.peek(h)?.revision === projected.revision ? true : undefined), 5000, 10)
    // a drive that loaded `first` before that acknowledgement appends on it: revision 0
    const later = await a.runPromise(store.append(first, [approve!]))
    expect(first.revision).toBe(0)
    expect(later.revision).toBe(projected.revision)
    expect(store.peek(h)?.revision).toBe(projected.revision)
    // so its projection is a CAS on that revision, and the store learns the one after it
    const again = await projectNow(a, later)
    expect(again.facts.last_seq).toBe(later.facts.last_seq)
    expect(store.peek(h)?.revision).toBe(again.revision)
  })

  it("load rebuilds from the stream when the projection is missing (the KV key deleted)", async () => {
    const h = newHeldId()
    const appended = await appendNew(a, h, story(h))
    await projectNow(a, appended)
    await a.runPromise(deleteProjection(h))
    expect(await a.runPromise(readProjection(h))).toBeNull()
    const loaded = await b.runPromise(loadFresh(h))
    expect(loaded?.facts).toEqual(appended.facts)
    expect(loaded?.facts).toEqual(reduce(h, await a.runPromise(readEventsAfter(h, 0))))
  })

  it("load catches up from the stream when the projection is stale", async () => {
    const h = newHeldId()
    const events = story(h)
    const store = await a.runPromise(HeldCallStore)
    const early = await a.runPromise(store.append({ facts: initialFacts(h), revision: 0 }, events.slice(0, 2)))
    await a.runPromise(writeProjection(early.facts, 0))
    // the rest is appended straight to the stream, as by a writer that crashed before projecting
    let last = early.facts.last_seq
    for (const e of events.slice(2)) last = await a.runPromise(appendEvent(e, last))
    expect((await a.runPromise(readProjection(h)))?.facts.last_seq).toBe(early.facts.last_seq)
    const loaded = await b.runPromise(loadFresh(h))
    expect(loaded?.facts.last_seq).toBe(last)
    expect(loaded?.facts).toEqual(reduce(h, await a.runPromise(readEventsAfter(h, 0))))
    // the writer that had the early view also catches up (its cache is never trusted alone)
    expect((await a.runPromise(store.load(h)))?.facts).toEqual(loaded?.facts)
  })

  it("a writer whose view is behind gets AppendConflict, and after a reload appends on top", async () => {
    const h = newHeldId()
    const [p, adj, hold, approve] = story(h)
    const sa = await a.runPromise(HeldCallStore)
    const sb = await b.runPromise(HeldCallStore)
    const base = await a.runPromise(sa.append({ facts: initialFacts(h), revision: 0 }, [p!]))
    const viewB = (await b.runPromise(sb.load(h)))!
    await a.runPromise(sa.append(base, [adj!]))
    expect((await b.runPromise(Effect.flip(sb.append(viewB, [hold!]))))._tag).toBe("AppendConflict")
    const reloaded = (await b.runPromise(sb.load(h)))!
    const after = await b.runPromise(sb.append(reloaded, [hold!, approve!]))
    expect(after.facts.seen).toEqual([p!, adj!, hold!, approve!].map((e) => e.event_id).sort())
    expect(await a.runPromise(Effect.flatMap(HeldCallStore, (s) => s.replay(h)))).toEqual(after.facts)
  })

  /** The call's facts as a kernel from before commit 918a122 projected them: no `lease_until`. */
  const putOldShapedProjection = (h: string, facts: HeldCallFacts) =>
    Effect.flatMap(Nats, ({ kv }) =>
      Effect.promise(async () => {
        const { lease_until: _dropped, ...old } = facts
        await (await kv(Buckets.facts)).put(h, new TextEncoder().encode(JSON.stringify(old)))
      })
    )

  // REGRESSION (fixed: an undecodable projection is treated as absent) (runtime/ledger/Projection.ts readProjection): a
  // projection that no longer decodes makes every load of that held call fail with LedgerError
  // instead of rebuilding from the stream, although design.md says the projection "can always be
  // rebuilt from the stream". Since commit 918a122 made `lease_until` a required field of
  // HeldCallFacts, this is every projection written by an earlier kernel (an existing `.wk/`
  // store): those held calls are stuck until someone deletes their KV keys by hand.
  it("load rebuilds from the stream when the projection does not decode (an older kernel's facts)", async () => {
    const h = newHeldId()
    const appended = await appendNew(a, h, story(h))
    await a.runPromise(putOldShapedProjection(h, appended.facts))
    const loaded = await b.runPromise(Effect.either(loadFresh(h)))
    expect(loaded._tag === "Left" ? loaded.left : loaded.right?.facts).toEqual(appended.facts)
  })

  // REGRESSION (fixed: storedSeq) (runtime/ledger/Projection.ts writeProjection, the lost-race branch): readProjection
  // now treats an undecodable projection as absent, so the rebuilt Loaded has revision 0; the
  // write then hits "key exists", re-reads, takes `last_seq` from the raw (old-shaped) JSON and,
  // as it is >= the rebuilt facts' last_seq, keeps it. The undecodable projection is never
  // replaced: every load of the call replays its whole stream, and KV readers see the old shape.
  // Expected: a stored value that does not decode as HeldCallFacts counts as last_seq 0.
  it("after such a rebuild, projecting the facts replaces the undecodable projection", async () => {
    const h = newHeldId()
    const appended = await appendNew(a, h, story(h))
    await a.runPromise(putOldShapedProjection(h, appended.facts))
    const rebuilt = (await b.runPromise(loadFresh(h)))!
    await b.runPromise(Effect.flatMap(HeldCallStore, (s) => s.project(rebuilt)))
    await eventually(async () => { const p = await a.runPromise(readProjection(h)); return p !== null && p.facts.lease_until !== undefined ? p : undefined }, 1000, 20)
    expect((await a.runPromise(readProjection(h)))?.facts).toEqual(appended.facts)
  })
})

describe("projection writes never regress", () => {
  /** Facts of the same call folded to different points of its stream. */
  const prefixes = async (h: string) => {
    const events = story(h)
    let last = 0
    const facts: Array<HeldCallFacts> = []
    for (const e of events) {
      last = await a.runPromise(appendEvent(e, last))
      facts.push(reduce(h, await a.runPromise(readEventsAfter(h, 0))))
    }
    return facts
  }
  const stored = (h: string) => a.runPromise(readProjection(h)).then((p) => p?.facts.last_seq ?? 0)

  it("an older write after a newer one keeps the newer facts", async () => {
    const h = newHeldId()
    const facts = await prefixes(h)
    const rev = await a.runPromise(writeProjection(facts[4]!, 0))
    expect(await a.runPromise(writeProjection(facts[1]!, 0))).toBe(rev)
    expect(await stored(h)).toBe(facts[4]!.last_seq)
  })

  it("concurrent writers of different prefixes, from two connections, always end at the furthest", async () => {
    for (let round = 0; round < 5; round++) {
      const h = newHeldId()
      const facts = await prefixes(h)
      const order = [...facts].sort(() => (round % 2 === 0 ? 1 : -1))
      await Promise.all(order.flatMap((f, i) => [(i % 2 === 0 ? a : b).runPromise(writeProjection(f, 0)), (i % 2 === 0 ? b : a).runPromise(writeProjection(f, 0))]))
      expect(await stored(h)).toBe(facts.at(-1)!.last_seq)
      expect((await a.runPromise(readProjection(h)))?.facts).toEqual(facts.at(-1))
    }
  })

  it("a writer holding a stale revision does not overwrite newer facts", async () => {
    const h = newHeldId()
    const facts = await prefixes(h)
    const r1 = await a.runPromise(writeProjection(facts[1]!, 0))
    const r2 = await b.runPromise(writeProjection(facts[3]!, r1))
    expect(r2).toBeGreaterThan(r1)
    await a.runPromise(writeProjection(facts[2]!, r1))
    expect(await stored(h)).toBe(facts[3]!.last_seq)
  })
})

describe("leases", () => {
  const T = 1_000_000
  const take = (rt: Rt, key: string, owner: string, now: number, ttl = 1000) => rt.runPromise(acquireLease(key, owner, ttl, now))
  const valueOf = async (key: string) => {
    const kv = await new Kvm(await a.runPromise(Effect.map(Nats, (n) => n.nc))).open(Buckets.leases)
    const e = await kv.get(key)
    return e === null || e.operation !== "PUT" ? null : (e.json() as { owner: string; until: number })
  }
  const leaseOf = (r: Awaited<ReturnType<typeof take>>): Lease => {
    if (!("lease" in r)) throw new Error(`expected a lease, got ${JSON.stringify(r)}`)
    return r.lease
  }

  it("create-if-absent: the first owner gets it; a second owner is refused while it is unexpired", async () => {
    const key = `effect.${newHeldId()}.g1`
    const first = leaseOf(await take(a, key, "k1", T))
    expect(first).toMatchObject({ key, owner: "k1", until: T + 1000 })
    expect(await take(b, key, "k2", T + 999)).toEqual({ heldBy: "k1", until: T + 1000 })
    expect(await valueOf(key)).toEqual({ owner: "k1", until: T + 1000 })
  })

  it("the owner may renew its own unexpired lease (a new revision)", async () => {
    const key = `effect.${newHeldId()}.g1`
    const first = leaseOf(await take(a, key, "k1", T))
    const renewed = leaseOf(await take(a, key, "k1", T + 500))
    expect(renewed.revision).toBeGreaterThan(first.revision)
    expect(renewed.until).toBe(T + 1500)
  })

  it("CAS takeover after expiry; of two racing takers exactly one wins", async () => {
    const key = `effect.${newHeldId()}.g1`
    leaseOf(await take(a, key, "k1", T))
    const results = await Promise.all([take(a, key, "k2", T + 2000), take(b, key, "k3", T + 2000)])
    const winners = results.filter((r) => "lease" in r)
    expect(winners).toHaveLength(1)
    const winner = leaseOf(winners[0]!)
    const loser = results.find((r) => !("lease" in r))
    expect(loser).toEqual({ heldBy: winner.owner, until: T + 3000 })
    expect(await valueOf(key)).toEqual({ owner: winner.owner, until: T + 3000 })
  })

  it("release only by the owner: a taken-over lease's old holder releases nothing", async () => {
    const key = `effect.${newHeldId()}.g1`
    const old = leaseOf(await take(a, key, "k1", T))
    const next = leaseOf(await take(b, key, "k2", T + 2000))
    await a.runPromise(releaseLease(old))
    expect(await valueOf(key)).toEqual({ owner: "k2", until: T + 3000 })
    // a forged lease with the owner's name but not its revision releases nothing either
    await a.runPromise(releaseLease({ ...next, revision: old.revision }))
    expect(await valueOf(key)).toEqual({ owner: "k2", until: T + 3000 })
    await b.runPromise(releaseLease(next))
    expect(await valueOf(key)).toBeNull()
  })

  it("after a release the lease is free again, for anyone, at once", async () => {
    const key = `effect.${newHeldId()}.g1`
    const first = leaseOf(await take(a, key, "k1", T))
    await a.runPromise(releaseLease(first))
    const again = leaseOf(await take(b, key, "k2", T + 1))
    expect(again.owner).toBe("k2")
    expect(await valueOf(key)).toEqual({ owner: "k2", until: T + 1001 })
  })
})

describe("provisioning", () => {
  it("is idempotent and keeps existing data", async () => {
    const h = newHeldId()
    await a.runPromise(appendAll(story(h).slice(0, 1)))
    await b.runPromise(provision())
    expect(await a.runPromise(storedOn(h))).toBe(1)
    const jsm = await jetstreamManager(await a.runPromise(Effect.map(Nats, (n) => n.nc)))
    const info = await jsm.streams.info(Streams.events)
    expect(info.config).toMatchObject({ subjects: ["wk.v1.events.>"], allow_direct: true })
    expect(info.config.duplicate_window).toBeGreaterThan(0)
  })
})
