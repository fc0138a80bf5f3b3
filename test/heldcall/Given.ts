import type { HeldEvent, SequencedEvent, EventOf } from "../../runtime/schema/Events.js"
import type { EvidenceRecord } from "../../runtime/schema/EvidenceTerm.js"
import type { HeldCallFacts } from "../../runtime/schema/Facts.js"
import type { WitnessContract } from "../../runtime/schema/WitnessContract.js"
import type { ReconcileContext } from "../../runtime/heldcall/Reconciler.js"
import { reduce } from "../../runtime/heldcall/Reducer.js"
import { decide, type Attest, type Command, type DecideContext, type Propose } from "../../runtime/heldcall/Decide.js"
import { expect } from "vitest"
import { callDigest, contractDigest, sha256Hex } from "../../runtime/schema/Canonical.js"

/**
 * Event builders for the pure reducer and reconciler specs (given / when / then). Time is a
 * fixed origin plus offsets, so nothing depends on the clock.
 */

export const HeldId = "h_" + "a".repeat(32)
export const T0 = Date.parse("2026-01-01T00:00:00.000Z")
/** ISO time `ms` after the origin. */
export const at = (ms: number): string => new Date(T0 + ms).toISOString()

export const Proposer = "agent:alice"
export const Registry: Record<string, ReadonlyArray<string>> = {
  "agent:alice": ["agent"],
  "agent:bob": ["agent"],
  "user:carol": ["human"],
  "user:dave": ["human"],
  "user:erin": ["human"],
  "compliance:zoe": ["compliance"],
  "svc:fraud": ["fraud"]
}

export const argsOf = (generation: number) => ({ from: "acct-a", to: "acct-b", amount: 1000 + generation * 500 })
export const digestOf = (generation: number) => callDigest("money_transfer", argsOf(generation))

export const HumanContract: WitnessContract = { rule: { class: "human" }, veto: ["compliance"] }
export const digestOfContract = (c: WitnessContract) => contractDigest(c)

/** The key every test statement is signed with; `ctxAt` registers it to every principal of the registry. */
export const TestKey = "AAAA"

const dummyEnvelope = (payload: Record<string, unknown>) => ({ payload: payload as never, key: TestKey, sig: "AAAA" })

export const proposed = (generation = 1, opts: { ttlMs?: number; createdMs?: number } = {}): EventOf<"call.proposed"> => ({
  type: "call.proposed",
  event_id: `call.proposed:${HeldId}:g${generation}`,
  held_id: HeldId,
  generation,
  at: at(opts.createdMs ?? 0),
  principal: Proposer,
  session_id: "s1",
  turn_id: "t1",
  call_id: "c1",
  tool: "money_transfer",
  args: argsOf(generation),
  call_digest: digestOf(generation),
  idempotency_key: `${HeldId}:g${generation}`,
  created_at: at(opts.createdMs ?? 0),
  expires_at: at((opts.createdMs ?? 0) + (opts.ttlMs ?? 3_600_000))
})

export const adjudicated = (
  generation = 1,
  opts: { verdict?: "ALLOW" | "REQUIRE_WITNESS" | "DENY"; policyEpoch?: number; contract?: WitnessContract | null } = {}
): EventOf<"call.adjudicated"> => {
  const verdict = opts.verdict ?? "REQUIRE_WITNESS"
  const contract = opts.contract === undefined ? (verdict === "REQUIRE_WITNESS" ? HumanContract : null) : opts.contract
  const epoch = opts.policyEpoch ?? 1
  return {
    type: "call.adjudicated",
    event_id: `call.adjudicated:${HeldId}:g${generation}:e${epoch}`,
    held_id: HeldId,
    generation,
    at: at(1),
    verdict,
    reasons: verdict === "ALLOW" ? [] : [{ by: "rule:money_transfer", reason: "over the threshold" }],
    policy_epoch: epoch,
    ...(contract ? { witness_contract: contract, contract_digest: contractDigest(contract) } : {}),
    decisions: []
  }
}

export const held = (generation = 1, contract: WitnessContract = HumanContract): EventOf<"call.held"> => ({
  type: "call.held",
  event_id: `call.held:${HeldId}:g${generation}:${contractDigest(contract)}`,
  held_id: HeldId,
  generation,
  at: at(2),
  witness_request: { contract, contract_digest: contractDigest(contract), presentation: {} },
  expires_at: at(3_600_000)
})

export interface Statement {
  readonly witness: string
  readonly class?: string
  readonly decision: "approve" | "reject" | "revoke" | "evidence"
  /** ms after the origin, or an exact ISO string. */
  readonly issued: number | string
  readonly expiresMs?: number
  readonly generation?: number
  readonly contract?: WitnessContract
  /** Recorded as rejected (stale / invalid) instead of accepted. */
  readonly rejected?: "stale" | "invalid"
  /** Distinguishes otherwise equal statements (the attestation digest). */
  readonly nonce?: string
  /** The witness's own reason, as signed. */
  readonly reason?: string
  /** What an `evidence` statement read for a contract term. */
  readonly evidence?: EvidenceRecord
  /** The call digest it binds (default: the generation's `digestOf`). */
  readonly callDigest?: string
}

/** One attestation event (accepted or rejected) for a statement. */
export const attestation = (s: Statement): EventOf<"attestation.accepted"> | EventOf<"attestation.rejected"> => {
  const generation = s.generation ?? 1
  const contract = s.contract ?? HumanContract
  const issued_at = typeof s.issued === "string" ? s.issued : at(s.issued)
  const expires_at = at(s.expiresMs ?? 600_000)
  const nonce = s.nonce ?? `${s.witness}|${s.class ?? ""}|${s.decision}|${issued_at}|${s.expiresMs ?? ""}|g${generation}|${contractDigest(contract)}|${s.rejected ?? ""}`
  const digest = sha256Hex(nonce)
  const klass = s.class ?? Registry[s.witness]?.[0] ?? "unknown"
  const payload = { op: "attest", principal: s.witness, class: klass, held_id: HeldId, generation, call_digest: s.callDigest ?? digestOf(generation), contract_digest: contractDigest(contract), decision: s.decision, issued_at, expires_at, nonce }
  if (s.rejected !== undefined) {
    return {
      type: "attestation.rejected",
      event_id: `attestation.rejected:${HeldId}:${digest}`,
      held_id: HeldId,
      generation,
      at: issued_at,
      witness: s.witness,
      class: klass,
      disposition: s.rejected,
      reason: `${s.rejected} for the test`,
      attestation_digest: digest,
      envelope: dummyEnvelope(payload)
    }
  }
  return {
    type: "attestation.accepted",
    event_id: `attestation.accepted:${HeldId}:${digest}`,
    held_id: HeldId,
    generation,
    at: issued_at,
    witness: s.witness,
    class: klass,
    decision: s.decision,
    attestation_digest: digest,
    call_digest: s.callDigest ?? digestOf(generation),
    contract_digest: contractDigest(contract),
    issued_at,
    expires_at,
    nonce,
    ...(s.reason !== undefined ? { reason: s.reason } : {}),
    ...(s.evidence !== undefined ? { evidence: s.evidence } : {}),
    envelope: dummyEnvelope(payload)
  }
}

export const epochChanged = (policyEpoch: number): EventOf<"policy.epoch_changed"> => ({
  type: "policy.epoch_changed",
  event_id: `policy.epoch_changed:${HeldId}:${policyEpoch}`,
  held_id: HeldId,
  generation: 0,
  at: at(10),
  policy_epoch: policyEpoch
})

/** Gives events consecutive stream sequences from `from`. */
export const sequenced = (events: ReadonlyArray<HeldEvent>, from = 1): Array<SequencedEvent> => events.map((event, i) => ({ seq: from + i, index: 0, event }))

/** given(events): the facts after folding them in order. */
export const given = (...events: ReadonlyArray<HeldEvent>): HeldCallFacts => reduce(HeldId, sequenced(events))

/** Folds more events on top of facts, continuing the sequence. */
export const fold = (facts: HeldCallFacts, ...events: ReadonlyArray<HeldEvent>): HeldCallFacts => reduce(HeldId, sequenced(events, facts.last_seq + 1), facts)

/**
 * A reconcile context at `nowMs` after the origin. Every principal with a class holds `TestKey`;
 * `extra` overrides any part (a `classesOf` override also decides who holds the key).
 */
export const ctxAt = (nowMs: number, policyEpoch = 1, extra: Partial<ReconcileContext> = {}): ReconcileContext => {
  const classesOf = extra.classesOf ?? ((p: string) => Registry[p] ?? [])
  return {
    now: T0 + nowMs,
    policyEpoch,
    classesOf,
    keysOf: (p) => (classesOf(p).length > 0 ? [TestKey] : []),
    principals: () => Object.keys(Registry),
    ...extra
  }
}

// ---- The deciders' vocabulary: commands, a decide context, and given(events).when(command).then(...). ----

/** An end of the call: denied by the adjudicator at `generation`. */
export const denied = (generation = 1): EventOf<"call.denied"> => ({
  type: "call.denied",
  event_id: `call.denied:${HeldId}:g${generation}`,
  held_id: HeldId,
  generation,
  at: at(3),
  reasons: [{ by: "rule:money_transfer", reason: "denied for the test" }]
})

/** The effect of `generation` was dispatched (the call may no longer be cancelled or edited). */
export const dispatched = (generation = 1): EventOf<"effect.dispatched"> => ({
  type: "effect.dispatched",
  event_id: `effect.dispatched:${HeldId}:${HeldId}:g${generation}:a1`,
  held_id: HeldId,
  generation,
  at: at(20),
  idempotency_key: `${HeldId}:g${generation}`,
  attempt: 1,
  owner: "k1",
  lease_until: at(30_020),
  policy_epoch: 1
})

/** The dispatched effect's outcome is unknown and waits for a read-back witness or an admin. */
export const outcomeUnknown = (generation = 1): EventOf<"effect.outcome_unknown"> => ({
  type: "effect.outcome_unknown",
  event_id: `effect.outcome_unknown:${HeldId}:${HeldId}:g${generation}:a1:witness`,
  held_id: HeldId,
  generation,
  at: at(40),
  idempotency_key: `${HeldId}:g${generation}`,
  reason: "no read-back",
  needs_witness: true
})

/** Each principal's own key (so a statement signed by a witness is not the proposer's key). */
export const keyOf = (principal: string) => `key:${principal}`

/** The policy admin of the decide context. */
export const Admin = "admin:ops"

/** A decide context at `nowMs` after the origin: the test registry, one admin, the tool's read-back witness class `fraud`. */
export const decideCtxAt = (nowMs: number, extra: Partial<DecideContext> = {}): DecideContext => ({
  now: T0 + nowMs,
  classesOf: (p) => Registry[p] ?? [],
  keysOf: (p) => (p in Registry || p === Admin ? [keyOf(p)] : []),
  principals: () => [...Object.keys(Registry), Admin],
  isAdmin: (p) => p === Admin,
  readbackWitnesses: (tool) => (tool === "money_transfer" ? { classes: ["fraud"] } : undefined),
  maxDependencyDepth: () => 4,
  heldTtlMs: 3_600_000,
  ...extra
})

/** An envelope signed (by the shape only: deciders trust authentication done at the edge) with the principal's own key. */
export const signedBy = <P extends { readonly principal: string }>(payload: P) => ({ payload: payload as never, key: keyOf(payload.principal), sig: "sig" })

export interface AttestOf {
  readonly witness: string
  readonly decision?: "approve" | "reject" | "revoke" | "evidence"
  readonly class?: string
  readonly generation?: number
  readonly callDigest?: string
  readonly contract?: WitnessContract
  readonly issuedMs?: number
  readonly expiresMs?: number
  readonly nonce?: string
  /** Signed with this principal's key instead of the witness's. */
  readonly keyOf?: string
  readonly evidence?: EvidenceRecord
}

/** A witness's signed attestation about the test call. */
export const attestOf = (a: AttestOf): Attest => {
  const generation = a.generation ?? 1
  const payload = {
    op: "attest" as const,
    principal: a.witness,
    class: a.class ?? Registry[a.witness]?.[0] ?? "unknown",
    held_id: HeldId,
    generation,
    call_digest: a.callDigest ?? digestOf(generation),
    contract_digest: contractDigest(a.contract ?? HumanContract),
    decision: a.decision ?? "approve",
    issued_at: at(a.issuedMs ?? 100),
    expires_at: at(a.expiresMs ?? 600_000),
    nonce: a.nonce ?? `nonce-${a.witness}-${a.decision ?? "approve"}-g${generation}`,
    ...(a.evidence !== undefined ? { evidence: a.evidence } : {})
  }
  const envelope = signedBy(payload)
  return { _tag: "Attest", payload: payload as Attest["payload"], envelope: a.keyOf === undefined ? envelope : { ...envelope, key: keyOf(a.keyOf) } }
}

/** The proposer's (or anyone's) signed proposal of generation `generation`'s call, optionally naming the generation it supersedes. */
export const proposeOf = (generation = 1, opts: { principal?: string; supersedes?: number } = {}): Propose => {
  const payload = {
    op: "propose" as const,
    principal: opts.principal ?? Proposer,
    session_id: "s1",
    turn_id: "t1",
    call_id: "c1",
    tool: "money_transfer",
    args: argsOf(generation),
    ...(opts.supersedes !== undefined ? { supersedes: opts.supersedes } : {})
  }
  return { _tag: "Propose", payload: payload as Propose["payload"], envelope: signedBy(payload), salt: "salt" }
}

/** What a decision is expected to be: its reply (a subset of fields), its events (a subset of fields each, in order), whether it drives. */
export interface Expected {
  readonly reply?: Record<string, unknown>
  readonly events?: ReadonlyArray<Partial<HeldEvent> & { readonly type: HeldEvent["type"] }>
  readonly drive?: "cached" | "fresh" | null
}

/**
 * given(events).when(command).then(expected): decides `command` on the facts of `events` and
 * checks the decision. Every decision's events are also folded with `evolve`: each must be new
 * to the facts and named by the held call it is decided on. `then` returns the decision and the
 * facts after it, for a further `when`.
 */
export const givenCall = (...events: ReadonlyArray<HeldEvent>) => whenOn(given(...events))

export const whenOn = (facts: HeldCallFacts) => ({
  facts,
  when: (command: Command, ctx: DecideContext = decideCtxAt(1_000)) => {
    const decision = decide(command, facts, ctx)
    const after = fold(facts, ...decision.events)
    return {
      decision,
      after,
      then: (expected: Expected) => {
        if (expected.reply !== undefined) expect(decision.reply).toMatchObject(expected.reply)
        if (expected.events !== undefined) {
          expect(decision.events.map((e) => e.type)).toEqual(expected.events.map((e) => e.type))
          decision.events.forEach((e, i) => expect(e).toMatchObject(expected.events![i]!))
        }
        if (expected.drive !== undefined) expect(decision.drive ?? null).toBe(expected.drive)
        for (const e of decision.events) {
          expect(e.held_id).toBe(facts.held_id)
          expect(facts.seen).not.toContain(e.event_id)
          expect(after.seen).toContain(e.event_id)
        }
        return whenOn(after)
      }
    }
  }
})
