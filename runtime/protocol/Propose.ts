import { Effect } from "effect"
import { HeldCallStore, type Loaded } from "../ledger/HeldCallStore.js"
import { Driver, type Driven } from "../loops/Driver.js"
import { KernelConfig } from "../KernelConfig.js"
import { beforeDispatch, initialFacts } from "../heldcall/Facts.js"
import { callDigest } from "../schema/Canonical.js"
import { HeldIds } from "./HeldIds.js"
import { ProposePayload, type ProposeCall } from "../schema/Requests.js"
import { wake } from "../ledger/Wakes.js"
import { OpenIndex } from "../ledger/OpenIndex.js"
import { effectivePreferences, layerPreferences, wideningsOf } from "../policy/Preferences.js"
import type { Preferences } from "../schema/Preferences.js"
import { Subjects } from "../schema/Subjects.js"
import { awaitEnd } from "./AwaitEnd.js"
import { conflict, invalidRequest, proposeReply, unavailable, type Reply } from "./Replies.js"
import { signedRequest, type Signed } from "./Request.js"
import { attach } from "./Dependency.js"
import { proposedEvent } from "./internal/proposedEvent.js"
import { staleEnvelope, supersededProposal } from "./internal/replayGuard.js"
import type { Ancestor } from "../schema/HeldCallSpec.js"
import type { HeldEvent } from "../schema/Events.js"

/**
 * `wk.v1.calls.propose`. An expired envelope is refused. The same (principal, session, turn,
 * call) with the same digest gets the same answer; a different digest while held is an edit (a
 * new generation) when it names the generation it supersedes, or names none and is no earlier
 * generation's call; else 409. After dispatch it is 409. The call is then driven inline, so ALLOW answers with the result.
 */
export const propose = (data: Uint8Array) =>
  Effect.gen(function* () {
    const req = yield* signedRequest(data, "propose", ProposePayload)
    const p = req.payload
    const stale = staleEnvelope(p.expires_at, Date.now())
    if (stale !== undefined) return stale
    const heldId = (yield* HeldIds).of(p).heldId
    if (p.preferences !== undefined) {
      const widening = wideningsOf(p.preferences, layerPreferences(req.policy, p.principal))[0]
      if (widening !== undefined) return invalidRequest(widening.message, `payload.preferences.${widening.field}`)
    }
    const prefs = effectivePreferences(req.policy, p.principal, p.preferences)
    const driver = yield* Driver
    let edge: Edge | undefined
    if (p.parent_held_id !== undefined) {
      const attached = yield* attach(heldId, callDigest(p.tool, p.args), req)
      if (attached._tag === "Answer") {
        if (attached.refusedParent !== undefined) {
          // The refused edge fails the parent closed; the recorded child reports its denial.
          for (const id of [attached.refusedParent, heldId]) {
            yield* wake(id)
            yield* Effect.forkDaemon(driver.drive(id).pipe(Effect.ignore))
          }
        }
        return attached.reply
      }
      edge = attached
    }
    // Driven inline: the proposal is committed with the verdict and the execution claim (one commit).
    if (edge === undefined && prefs.wait?.mode !== "background") {
      const driven = yield* proposeAndDrive(heldId, req, prefs)
      if ("status" in driven) return driven
      return yield* answer(heldId, driven, prefs)
    }
    const recorded = yield* record(heldId, req, prefs, edge)
    if (recorded !== "ok") return recorded
    // A nested call must report its end to its parent even if this process stops: the wake is durable.
    if (edge !== undefined) yield* wake(heldId)
    if (prefs.wait?.mode === "background") {
      // The wake makes the controller drive the call even if this process stops right now; the
      // open-call index lets the recovery sweep find it even if that wake is lost (nobody sends
      // this proposal again: its result is owed on the session).
      yield* Effect.all([wake(heldId), Effect.flatMap(OpenIndex, (index) => index.add(heldId))], { concurrency: 2, discard: true })
      yield* Effect.forkDaemon(driver.drive(heldId, "cached").pipe(Effect.ignore))
      return accepted(heldId, p.session_id)
    }
    return yield* answer(heldId, yield* driver.drive(heldId, "cached"), prefs)
  })

/** The reply once the inline drive stopped: the outcome, the hold, or (blocking) the end. */
const answer = (heldId: string, driven: Driven, prefs: Preferences) =>
  Effect.gen(function* () {
    const reply = driven.facts === null ? null : proposeReply(driven.facts)
    if (reply !== null && reply.status === 202 && prefs.wait?.mode === "block" && prefs.wait.max_ms > 0) {
      return (yield* awaitEnd(heldId, prefs.wait.max_ms)) ?? (yield* currentReply(heldId, reply))
    }
    return reply ?? (yield* awaitAnswer(heldId))
  })

/**
 * Decides the proposal on this process's view and hands its event to the drive, whose first
 * commit carries it with the verdict (and, for ALLOW, the execution claim). A conflict means
 * the call changed meanwhile: decided again on fresh facts.
 */
const proposeAndDrive = (heldId: string, req: Signed<ProposeCall>, prefs: Preferences) =>
  Effect.gen(function* () {
    const store = yield* HeldCallStore
    const driver = yield* Driver
    const { salt } = (yield* HeldIds).of(req.payload)
    const digest = callDigest(req.payload.tool, req.payload.args)
    for (let attempt = 0; attempt < 16; attempt++) {
      const loaded: Loaded = (attempt === 0 ? store.peek(heldId) : yield* store.load(heldId, "cached")) ?? { facts: initialFacts(heldId), revision: 0 }
      const decided = proposalOf(loaded, heldId, salt, digest, req, prefs)
      if (decided === "ok") return yield* driver.drive(heldId, "cached")
      if ("status" in decided) return decided
      const r = yield* driver.driveFrom(heldId, { base: loaded, pending: [decided] }).pipe(Effect.either)
      if (r._tag === "Right") return r.right
      if (r.left._tag !== "AppendConflict") return yield* r.left
    }
    return unavailable(`held call ${heldId} is changing too fast; retry`)
  })

/** The parent a nested call attached to, and the chain above it. */
interface Edge {
  readonly parent_held_id: string
  readonly ancestors: ReadonlyArray<Ancestor>
  readonly parent_expires_at: string
}

/** The answer to `wait: {mode: "background"}`: accepted; the result arrives on the session. */
const accepted = (heldId: string, sessionId: string): Reply => ({
  status: 202,
  outcome: "accepted",
  held_id: heldId,
  delivery: { subject: Subjects.sessionResults(sessionId) }
})

/** The held reply as it stands now (an edit or a stale contract may have changed it). */
const currentReply = (heldId: string, fallback: Reply) =>
  Effect.gen(function* () {
    const loaded = yield* (yield* HeldCallStore).load(heldId)
    return (loaded === null ? null : proposeReply(loaded.facts)) ?? fallback
  })

/** Writes the proposal (or its edit) unless the call already has this exact digest. */
export const record = (heldId: string, req: Signed<ProposeCall>, prefs: Preferences, edge?: Edge) =>
  Effect.gen(function* () {
    const store = yield* HeldCallStore
    const p = req.payload
    const digest = callDigest(p.tool, p.args)
    const { salt } = (yield* HeldIds).of(p)
    return yield* store.serialized(
      heldId,
      Effect.gen(function* () {
        for (let attempt = 0; attempt < 16; attempt++) {
          // A call this process has not seen is most likely new: try to create it (expected
          // sequence 0) before reading anything; a conflict means it exists, and we read it.
          const loaded: Loaded = (attempt === 0 ? store.peek(heldId) : yield* store.load(heldId, "cached")) ?? { facts: initialFacts(heldId), revision: 0 }
          const event = proposalOf(loaded, heldId, salt, digest, req, prefs, edge)
          if (event === "ok" || "status" in event) return event
          const r = yield* store.append(loaded, [event]).pipe(Effect.either)
          if (r._tag === "Right") return "ok" as const
          if (r.left._tag !== "AppendConflict") return yield* r.left
        }
        return unavailable(`held call ${heldId} is changing too fast; retry`)
      })
    )
  })

/**
 * The proposal's decision on `loaded`: "ok" when the call already has this exact digest, a
 * refusal, or the `call.proposed` event to commit (a new call or an edit).
 */
const proposalOf = (loaded: Loaded, heldId: string, salt: string, digest: string, req: Signed<ProposeCall>, prefs: Preferences, edge?: Edge): "ok" | Reply | HeldEvent => {
  const p = req.payload
  const f = loaded.facts
  if (f.spec !== null && f.spec.parent_held_id !== edge?.parent_held_id) {
    return conflict("dependency_mismatch", `held call ${heldId} ${f.spec.parent_held_id === undefined ? "is a root call" : `is a dependency of ${f.spec.parent_held_id}`}; a proposal with another parent_held_id needs a new call_id`)
  }
  if (f.spec !== null && f.spec.call_digest === digest) return "ok" as const
  if (f.spec !== null && !beforeDispatch(f)) {
    return f.lifecycle === "open" || f.lifecycle === "completed"
      ? conflict("already_dispatched", `held call ${heldId} was already dispatched; a changed proposal needs a new call_id`)
      : conflict(`call_${f.lifecycle}`, `held call ${heldId} is ${f.lifecycle}; a changed proposal needs a new call_id`)
  }
  // An edit names the generation it replaces, or at least proposes no earlier generation's call.
  if (f.spec !== null) {
    const superseded = supersededProposal(f, p.supersedes, digest)
    if (superseded !== undefined) return superseded
  } else if (p.supersedes !== undefined) {
    return conflict("superseded", `held call ${heldId} has no generation ${p.supersedes} to supersede`)
  }
  const generation = f.generation + 1
  const now = Date.now()
  // A nested call never outlives the call it serves.
  const ttl = Math.min(req.policy.heldTtlMs, prefs.expires_in_ms ?? Number.POSITIVE_INFINITY, edge === undefined ? Number.POSITIVE_INFINITY : Math.max(0, Date.parse(edge.parent_expires_at) - now))
  return proposedEvent({ heldId, salt, generation, req, digest, now, expiresAt: now + ttl, ...(edge !== undefined ? { parent: edge } : {}) })
}

/** Another worker is deciding or executing this call: wait for its answer, briefly. */
const awaitAnswer = (heldId: string) =>
  Effect.gen(function* () {
    const store = yield* HeldCallStore
    const driver = yield* Driver
    const cfg = yield* KernelConfig
    const deadline = Date.now() + cfg.answerWaitMs
    let delay = 2
    while (Date.now() < deadline) {
      yield* Effect.sleep(delay)
      delay = Math.min(delay * 2, 100)
      const loaded = yield* store.load(heldId)
      const reply = loaded === null ? null : proposeReply(loaded.facts)
      if (reply !== null) return reply
      if (delay === 100) yield* driver.drive(heldId)
    }
    return { status: 504, outcome: "pending", held_id: heldId, error: { code: "still_running", message: `held call ${heldId} is still running; read it with wk.v1.held.get` } } satisfies Reply
  })
