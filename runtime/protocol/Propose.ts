import { Clock, Effect } from "effect"
import { HeldCallStore } from "../ledger/HeldCallStore.js"
import { Driver, type Driven } from "../loops/Driver.js"
import { HeldCalls } from "../loops/HeldCalls.js"
import { KernelConfig } from "../KernelConfig.js"
import { attachedOf, refusedOf } from "../heldcall/decide/Dependency.js"
import type { Edge, Propose } from "../heldcall/decide/Propose.js"
import { HeldIds } from "./HeldIds.js"
import { ProposePayload, type ProposeCall } from "../schema/Requests.js"
import { effectivePreferences, layerPreferences, wideningsOf } from "../policy/Preferences.js"
import type { Preferences } from "../schema/Preferences.js"
import { Subjects } from "../schema/Subjects.js"
import { awaitEnd } from "./AwaitEnd.js"
import { forbidden, invalidRequest, proposeReply, type Reply } from "./Replies.js"
import { signedRequest, type Signed } from "./Request.js"
import { staleEnvelope } from "./internal/replayGuard.js"
import { behalfRefusal, bindingsOf } from "../policy/IdentityBindings.js"
import { keepRequestContinuation } from "./KeepContinuation.js"

/**
 * `wk.v1.calls.propose`. An expired envelope is refused; so is a preference wider than the
 * principal's layers allow. The proposal is decided by heldcall/decide/Propose.ts (the same call
 * again, an edit, or 409); a nested call first attaches to its parent (heldcall/decide/Dependency.ts).
 * The call is then driven inline, so ALLOW answers with the result; `wait: background` answers
 * at once and the result arrives on the session.
 */
export const propose = (data: Uint8Array) =>
  Effect.gen(function* () {
    const req = yield* signedRequest(data, "propose", ProposePayload)
    const p = req.payload
    const stale = staleEnvelope(p.expires_at, yield* Clock.currentTimeMillis)
    if (stale !== undefined) return stale
    const unbound = behalfRefusal(bindingsOf(req.policy.profiles), p.principal, p.on_behalf_of, Date.now())
    if (unbound !== undefined) return forbidden(unbound)
    const kept = yield* keepRequestContinuation(data, p.continuation_digest)
    if (kept !== undefined) return kept
    const { heldId, salt } = (yield* HeldIds).of(p)
    if (p.preferences !== undefined) {
      const widening = wideningsOf(p.preferences, layerPreferences(req.policy, p.principal))[0]
      if (widening !== undefined) return invalidRequest(widening.message, `payload.preferences.${widening.field}`)
    }
    const prefs = effectivePreferences(req.policy, p.principal, p.preferences)
    let edge: Edge | undefined
    if (p.parent_held_id !== undefined) {
      const attached = yield* attach(heldId, salt, req)
      if ("status" in attached) return attached
      edge = attached
    }
    // Root calls answered inline are committed with their verdict and execution claim (one commit).
    const background = prefs.wait?.mode === "background"
    const handled = yield* (yield* HeldCalls).handle(heldId, proposal(req, salt, prefs, edge), { policy: req.policy, follow: background ? "fork" : "await", index: background })
    if (handled.drive === null) return handled.reply
    if (background) return accepted(heldId, p.session_id)
    return yield* answer(heldId, handled.driven, prefs)
  })

/** The proposal command of a signed request. */
export const proposal = (req: Signed<ProposeCall>, salt: string, prefs: Preferences, edge?: Edge): Propose => ({
  _tag: "Propose",
  payload: req.payload,
  envelope: req.envelope,
  salt,
  ...(prefs.expires_in_ms !== undefined ? { expiresInMs: prefs.expires_in_ms } : {}),
  ...(edge !== undefined ? { edge } : {})
})

/**
 * Attaches the nested call to its parent (decided on the parent), or answers why not. A refused
 * edge (a cycle, too deep) fails the parent closed and records the child as denied; both are driven.
 */
const attach = (childId: string, salt: string, req: Signed<ProposeCall>) =>
  Effect.gen(function* () {
    const calls = yield* HeldCalls
    const child = yield* (yield* HeldCallStore).load(childId)
    const { payload, envelope, policy } = req
    const { reply } = yield* calls.handle(payload.parent_held_id!, { _tag: "Attach", childId, payload, envelope, child: child?.facts.spec ?? null }, { policy })
    const edge = attachedOf(reply)
    if (edge !== undefined) return edge
    const refused = refusedOf(reply)
    if (refused === undefined) return reply
    yield* calls.handle(childId, { _tag: "ProposeRefused", payload, envelope, salt, reason: refused }, { policy })
    const { refused: _, ...denied } = reply
    return denied as Reply
  })

/** The reply once the inline drive stopped: the outcome, the hold, or (blocking) the end. */
const answer = (heldId: string, driven: Driven | null, prefs: Preferences) =>
  Effect.gen(function* () {
    const reply = driven?.facts == null ? null : proposeReply(driven.facts)
    if (reply !== null && reply.status === 202 && prefs.wait?.mode === "block" && prefs.wait.max_ms > 0) {
      return (yield* awaitEnd(heldId, prefs.wait.max_ms)) ?? (yield* currentReply(heldId, reply))
    }
    return reply ?? (yield* awaitAnswer(heldId))
  })

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

/** Another worker is deciding or executing this call: wait for its answer, briefly. */
const awaitAnswer = (heldId: string) =>
  Effect.gen(function* () {
    const store = yield* HeldCallStore
    const driver = yield* Driver
    const cfg = yield* KernelConfig
    const deadline = (yield* Clock.currentTimeMillis) + cfg.answerWaitMs
    let delay = 2
    while ((yield* Clock.currentTimeMillis) < deadline) {
      yield* Effect.sleep(delay)
      delay = Math.min(delay * 2, 100)
      const loaded = yield* store.load(heldId)
      const reply = loaded === null ? null : proposeReply(loaded.facts)
      if (reply !== null) return reply
      if (delay === 100) yield* driver.drive(heldId)
    }
    return { status: 504, outcome: "pending", held_id: heldId, error: { code: "still_running", message: `held call ${heldId} is still running; read it with wk.v1.held.get` } } satisfies Reply
  })
