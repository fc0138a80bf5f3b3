import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { evolve, reduce } from "../../runtime/heldcall/Reducer.js"
import { initialFacts } from "../../runtime/heldcall/Facts.js"
import { repoRoot } from "../../runtime/cli/Paths.js"
import type { HeldEvent, SequencedEvent } from "../../runtime/schema/Events.js"
import type { HeldCallFacts } from "../../runtime/schema/Facts.js"
import { HeldEvent as EventSchema } from "../../runtime/schema/Events.js"
import { Schema } from "effect"
import {
  HeldId,
  adjudicated,
  at,
  attestation,
  epochChanged,
  fold,
  given,
  held,
  proposed,
  sequenced,
  type Statement
} from "./Given.js"

/** Fixed seed for deterministic CI; set WK_FC_SEED to explore other cases. */
fc.configureGlobal({ seed: Number(process.env["WK_FC_SEED"] ?? 8785) })

const Witnesses = ["user:carol", "user:dave", "user:erin", "compliance:zoe", "svc:fraud", "agent:bob"] as const

/** A witness statement: who, what, when (small time range so ties happen), accepted or rejected. */
const statementArb: fc.Arbitrary<Statement> = fc.record({
  witness: fc.constantFrom(...Witnesses),
  decision: fc.constantFrom("approve", "reject", "revoke", "evidence") as fc.Arbitrary<Statement["decision"]>,
  issued: fc.integer({ min: 100, max: 140 }),
  generation: fc.constantFrom(1, 1, 1, 2),
  rejected: fc.option(fc.constantFrom("stale", "invalid") as fc.Arbitrary<"stale" | "invalid">, { nil: undefined, freq: 4 })
})

/** Statements with distinct attestation digests (one cause, one event). */
const statementsArb = fc.uniqueArray(statementArb, {
  minLength: 1,
  maxLength: 14,
  selector: (s) => `${s.witness}|${s.decision}|${s.issued}|${s.generation}|${s.rejected ?? ""}`
})

/**
 * Events with fixed sequences, then delivered in any order with any duplicates: `keys` orders
 * the delivery, `dups` picks events delivered again (with their own sequence).
 */
const deliveryOf = <T>(n: number) =>
  fc.record({
    dups: fc.array(fc.nat({ max: Math.max(0, n - 1) }), { maxLength: n }),
    keys: fc.array(fc.double({ noNaN: true }), { minLength: 2 * n, maxLength: 2 * n })
  }).map(({ dups, keys }) => (items: ReadonlyArray<T>): Array<T> => {
    const all = [...items, ...dups.map((i) => items[i % items.length]!).filter((x) => x !== undefined)]
    return all.map((x, i) => ({ x, k: keys[i]! })).sort((a, b) => a.k - b.k).map((p) => p.x)
  })

/** A held call parked on a witness at generation 1 (seq 1..3). */
const prefix: ReadonlyArray<HeldEvent> = [proposed(1), adjudicated(1), held(1)]

describe("reduce: order and duplication of independent events", () => {
  it("any permutation and any duplication of attestations (accepted, rejected, revokes) gives the same facts", () => {
    fc.assert(
      fc.property(
        statementsArb.chain((sts) => fc.tuple(fc.constant(sts), deliveryOf<SequencedEvent>(sts.length))),
        ([sts, deliver]) => {
          // given a held call and attestations recorded at fixed stream sequences
          const base = sequenced([...prefix, ...sts.map(attestation)])
          const expected = reduce(HeldId, base)
          // when the independent ones arrive in any order, some twice
          const shuffled = [...base.slice(0, 3), ...deliver(base.slice(3))]
          const actual = reduce(HeldId, shuffled)
          // then the facts are the same, field for field (seen is a sorted set, last_seq the max)
          expect(actual).toEqual(expected)
        }
      ),
      { numRuns: 300 }
    )
  })

  it("policy epoch bumps commute with attestations and with each other", () => {
    fc.assert(
      fc.property(
        statementsArb,
        fc.uniqueArray(fc.integer({ min: 2, max: 9 }), { minLength: 1, maxLength: 4 }),
        fc.func(fc.double({ noNaN: true })),
        (sts, epochs, order) => {
          const satisfied = { type: "readiness.changed", event_id: `readiness.changed:${HeldId}:x`, held_id: HeldId, generation: 1, at: at(50), readiness: "satisfied", policy_epoch: 1 } as const
          const head = sequenced([...prefix, satisfied])
          const tail = sequenced([...sts.map(attestation), ...epochs.map(epochChanged)], head.length + 1)
          const expected = reduce(HeldId, [...head, ...tail])
          const permuted = [...tail].sort((a, b) => order(a.event.event_id) - order(b.event.event_id) || a.seq - b.seq)
          const actual = reduce(HeldId, [...head, ...permuted])
          expect(actual).toEqual(expected)
          expect(actual.policy_epoch).toBe(Math.max(...epochs))
        }
      ),
      { numRuns: 200 }
    )
  })

  it("delivery attempts and the acknowledgement commute once the call has ended", () => {
    const ended = [
      ...prefix,
      { type: "effect.recorded", event_id: "effect.recorded:x", held_id: HeldId, generation: 1, at: at(60), idempotency_key: "k", ok: true, result: { ok: 1 }, via: "dispatch" },
      { type: "result.admitted", event_id: "result.admitted:x", held_id: HeldId, generation: 1, at: at(61), result: { ok: 1 }, decisions: [] }
    ] as ReadonlyArray<HeldEvent>
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.boolean(), deliveryOf<SequencedEvent>(6), (attempts, acked, deliver) => {
        const head = sequenced(ended)
        const tail = sequenced(
          [
            ...Array.from({ length: attempts }, (_, i): HeldEvent => ({ type: "delivery.published", event_id: `delivery.published:${i + 1}`, held_id: HeldId, generation: 1, at: at(100 + i), delivery_id: "d1", attempt: i + 1 })),
            ...(acked ? [{ type: "delivery.acknowledged", event_id: "delivery.acknowledged:d1", held_id: HeldId, generation: 1, at: at(200), delivery_id: "d1", envelope: { payload: {}, key: "AAAA", sig: "AAAA" } } as HeldEvent] : [])
          ],
          head.length + 1
        )
        const expected = reduce(HeldId, [...head, ...tail])
        expect(reduce(HeldId, [...head, ...deliver(tail)])).toEqual(expected)
        expect(expected.continuation_delivery).toBe(acked ? "acknowledged" : "delivered")
        expect(expected.delivery_attempts).toBe(attempts)
        expect(expected.delivery_last_at).toBe(at(100 + attempts - 1))
      }),
      { numRuns: 200 }
    )
  })
})

describe("evolve: an event id folded twice changes nothing", () => {
  const anyEventsArb = statementsArb.map((sts) => sequenced([...prefix, ...sts.map(attestation)]))

  it("re-folding any already-seen event at its own sequence returns the very same facts", () => {
    fc.assert(
      fc.property(anyEventsArb, fc.nat(), (events, pick) => {
        const facts = reduce(HeldId, events)
        const again = events[pick % events.length]!
        expect(evolve(facts, again)).toBe(facts)
      })
    )
  })

  it("a seen event re-delivered at a later sequence only advances last_seq", () => {
    fc.assert(
      fc.property(anyEventsArb, fc.nat(), fc.integer({ min: 1, max: 1000 }), (events, pick, later) => {
        const facts = reduce(HeldId, events)
        const again = events[pick % events.length]!
        expect(evolve(facts, { seq: facts.last_seq + later, index: 0, event: again.event })).toEqual({ ...facts, last_seq: facts.last_seq + later })
      })
    )
  })

  it("a seen id with a different body is still ignored (the id, not the body, is the cause)", () => {
    const facts = given(proposed(1), adjudicated(1), held(1))
    const forged = { ...adjudicated(1, { verdict: "ALLOW" }), event_id: adjudicated(1).event_id }
    expect(evolve(facts, { seq: 3, index: 0, event: forged })).toBe(facts)
  })
})

describe("reduce: given / when / then", () => {
  it("a revoke withdraws every approval of that witness on the generation, whatever their issue times; others' stand", () => {
    // given a held call with approvals from carol and dave
    const facts = fold(
      given(...prefix),
      attestation({ witness: "user:carol", decision: "approve", issued: 100 }),
      attestation({ witness: "user:dave", decision: "approve", issued: 101 }),
      // when carol revokes, then approves again later
      attestation({ witness: "user:carol", decision: "revoke", issued: 200 }),
      attestation({ witness: "user:carol", decision: "approve", issued: 300 })
    )
    // then both her approvals are withdrawn (a revoke is final for the generation); dave's stands
    expect(facts.evidence.map((e) => [e.witness, e.decision, e.issued_at, e.status])).toEqual([
      ["user:carol", "approve", at(100), "revoked"],
      ["user:dave", "approve", at(101), "valid"],
      ["user:carol", "revoke", at(200), "valid"],
      ["user:carol", "approve", at(300), "revoked"]
    ])
  })

  it("a revoke wins over an approval that claims a later (future) issue time", () => {
    // given an approval whose issued_at lies in the future, within the allowed skew
    const facts = fold(given(...prefix), attestation({ witness: "user:carol", decision: "approve", issued: 50_000 }), attestation({ witness: "user:carol", decision: "revoke", issued: 1_000 }))
    // then the revoke still withdraws it
    expect(facts.evidence.find((e) => e.decision === "approve")?.status).toBe("revoked")
  })

  it("a reject is final: no revoke withdraws it", () => {
    const facts = fold(given(...prefix), attestation({ witness: "user:carol", decision: "reject", issued: 100 }), attestation({ witness: "user:carol", decision: "revoke", issued: 200 }))
    expect(facts.evidence.find((e) => e.decision === "reject")?.status).toBe("valid")
  })

  it("a revoke that arrives before the statement it withdraws still withdraws it", () => {
    const facts = fold(given(...prefix), attestation({ witness: "user:carol", decision: "revoke", issued: 200 }), attestation({ witness: "user:carol", decision: "approve", issued: 100 }))
    expect(facts.evidence.find((e) => e.decision === "approve")?.status).toBe("revoked")
  })

  it("a revoke for another generation withdraws nothing here", () => {
    const facts = fold(given(...prefix), attestation({ witness: "user:carol", decision: "approve", issued: 100 }), attestation({ witness: "user:carol", decision: "revoke", issued: 200, generation: 2 }))
    expect(facts.evidence.find((e) => e.decision === "approve")?.status).toBe("valid")
  })

  it("a rejected revoke withdraws nothing", () => {
    const facts = fold(given(...prefix), attestation({ witness: "user:carol", decision: "approve", issued: 100 }), attestation({ witness: "user:carol", decision: "revoke", issued: 200, rejected: "invalid" }))
    expect(facts.evidence.map((e) => e.status)).toEqual(["valid", "rejected"])
  })

  it("evidence keeps its witness's own reason and the key that signed it", () => {
    const a = { ...attestation({ witness: "user:carol", decision: "reject", issued: 100 }), reason: "amount looks wrong" }
    const facts = fold(given(...prefix), a)
    expect(facts.evidence[0]).toMatchObject({ reason: "amount looks wrong", key: a.envelope.key, status: "valid" })
  })

  it("an edit is a new generation: readiness goes stale and the verdict is pending again", () => {
    const allowed = given(proposed(1), adjudicated(1, { verdict: "ALLOW" }))
    expect(allowed.readiness).toBe("satisfied")
    const edited = fold(allowed, proposed(2))
    expect(edited).toMatchObject({ generation: 2, verdict: "pending", readiness: "stale", policy_epoch_checked: 0, contract_digest: null })
    expect(edited.spec?.call_digest).toBe(proposed(2).call_digest)
    // a late copy of the older proposal changes nothing
    expect(fold(edited, { ...proposed(1), event_id: "call.proposed:late" })).toMatchObject({ generation: 2, spec: edited.spec })
  })

  it("the first end wins: a cancel after expiry changes nothing", () => {
    const expired = fold(given(...prefix), { type: "call.expired", event_id: "e", held_id: HeldId, generation: 1, at: at(10) })
    const cancelled = fold(expired, { type: "call.cancelled", event_id: "c", held_id: HeldId, generation: 1, at: at(11), by: "agent:alice", reason: "no", envelope: { payload: {}, key: "AAAA", sig: "AAAA" } })
    expect(cancelled).toMatchObject({ lifecycle: "expired", outcome: "expired", continuation_delivery: "pending", reasons: expired.reasons })
  })
})

const fixture = (name: string) => JSON.parse(readFileSync(join(repoRoot, "test", "fixtures", name), "utf8")) as unknown
const decodeEvent = Schema.decodeUnknownEither(EventSchema)
type RawEvent = { seq: number; type: string }
/** Recorded events decoded with today's schema (a stream written by an older kernel must still decode). */
const decodeLog = (raw: ReadonlyArray<RawEvent>): Array<SequencedEvent> =>
  raw.map(({ seq, ...event }) => {
    const d = decodeEvent(event)
    if (d._tag === "Left") throw new Error(`recorded event seq ${seq} (${event.type}) no longer decodes: ${d.left.message.slice(-300)}`)
    return { seq, index: 0, event: d.right }
  })
const undecodable = (raw: ReadonlyArray<RawEvent>) => raw.filter(({ seq: _seq, ...event }) => decodeEvent(event)._tag === "Left").map((e) => `${e.seq}:${e.type}`)

/** Facts as plain JSON without the evidence's signing keys (recorded before evidence kept them). */
const withoutKeys = (f: HeldCallFacts): unknown => JSON.parse(JSON.stringify({ ...f, evidence: f.evidence.map(({ key: _key, ...e }) => e) }))

describe("replay of a recorded event log", () => {
  const raw = fixture("witnessed-transfer.events.json") as Array<RawEvent>
  // The kernel's own projection at recording time. Compared as plain JSON, so a deliberate change
  // of the facts shows up as a field-by-field diff (re-record with recordWitnessedTransfer.ts).
  const expected = fixture("witnessed-transfer.facts.json") as HeldCallFacts

  it("every recorded event decodes with the current event schema", () => {
    expect(undecodable(raw)).toEqual([])
  })

  it("the witnessed transfer (edit, stale + invalid attestations, revoke, two approvals, execution, delivery, ack) reduces to the kernel's projection", () => {
    // given the event log a kernel wrote to WK_EVENTS (test/fixtures/recordWitnessedTransfer.ts)
    const events = decodeLog(raw)
    // when the pure reducer replays it
    const facts = reduce(expected.held_id, events)
    // then it derives exactly the facts the kernel projected at the time (evidence now also keeps its signing key)
    expect(withoutKeys(facts)).toEqual(expected)
    expect(facts.evidence.every((e) => /^[A-Za-z0-9+/]{43}=$/.test(e.key))).toBe(true)
    expect(facts).toMatchObject({ generation: 2, lifecycle: "completed", execution: "effect-recorded", result_admission: "admitted", continuation_delivery: "acknowledged", last_seq: expected.last_seq })
    expect(facts.evidence.map((e) => [e.witness, e.decision, e.status])).toEqual([
      ["user:carol", "approve", "rejected"],
      ["agent:alice", "approve", "rejected"],
      ["user:carol", "approve", "revoked"],
      ["user:carol", "revoke", "valid"],
      ["user:dave", "approve", "valid"],
      ["user:erin", "approve", "valid"]
    ])
    // and replaying it twice over (every event duplicated) changes nothing
    expect(reduce(expected.held_id, [...events, ...events])).toEqual(facts)
  })

  it("folding the recorded log from any prefix's facts gives the same end (a projection can resume anywhere)", () => {
    const events = decodeLog(raw)
    const full = reduce(expected.held_id, events)
    for (let k = 0; k <= events.length; k++) {
      const mid = reduce(full.held_id, events.slice(0, k), initialFacts(full.held_id))
      expect(reduce(full.held_id, events.slice(k), mid)).toEqual(full)
    }
  })
})

describe("replay of a log recorded by an older kernel", () => {
  // REGRESSION (fixed: lease_until is optional, absent = null) (runtime/schema/Events.ts, EffectDispatched since 918a122): `lease_until`
  // became a required field of effect.dispatched, so every effect.dispatched already in a
  // WK_EVENTS stream (for example an existing `.wk/` store of `npm start`, which "keeps all held
  // calls" across restarts) fails to decode: readEventsAfter throws for that held call, load and
  // replay fail, and invariant 10 (every state reconstructible from the stream) is broken for
  // old streams. Same for runtime/schema/Facts.ts `lease_until` in old KV projections (see
  // test/ledger: an undecodable projection is not rebuilt). Making both optional (absent = null)
  // fixes it. This fixture is the same held call recorded by the kernel just before 918a122.
  const raw = fixture("witnessed-transfer.before-lease-until.events.json") as Array<RawEvent>
  const expected = fixture("witnessed-transfer.before-lease-until.facts.json") as HeldCallFacts

  it("every event of the older log still decodes", () => {
    expect(undecodable(raw)).toEqual([])
  })

  it("the older log still replays to the facts that kernel projected (lease_until absent = null)", () => {
    const facts = reduce(expected.held_id, decodeLog(raw))
    // Fields added since (absent = their initial value): lease_until, executed (= the proposal, no
    // transform), and earlier_digests (the digest the edit replaced).
    const executed = { tool: expected.spec!.tool, args: expected.spec!.args, call_digest: expected.spec!.call_digest }
    const replaced = raw.find((e) => e.type === "call.proposed" && (e as { generation?: number }).generation === 1) as unknown as { call_digest: string }
    expect(withoutKeys(facts)).toEqual({ ...expected, lease_until: null, executed, earlier_digests: [replaced.call_digest] })
  })
})
