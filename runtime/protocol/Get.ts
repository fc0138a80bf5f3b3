import { Effect, Either } from "effect"
import { HeldCallStore } from "../ledger/HeldCallStore.js"
import { PolicyStore } from "../policy/PolicyStore.js"
import { heldView, roleOf, type Role } from "../heldcall/Views.js"
import { countingApprovals } from "../heldcall/Counting.js"
import { ruleProgress } from "../heldcall/WitnessRuleEval.js"
import { registryOf, type ActivePolicy } from "../policy/ActivePolicy.js"
import type { HeldCallFacts } from "../schema/Facts.js"
import { GetRequest } from "../schema/Requests.js"
import { inboxOptionOf } from "../schema/Subjects.js"
import { notFound } from "./Replies.js"
import { readerFor } from "./ReadProof.js"
import { plainRequest, Rejected } from "./Request.js"

/**
 * NATS users that read every call's witness view unsigned: the witnesses' login, the witness
 * routes' and the kernel's own (operators' CLI). The kernel knows a request's login by its reply
 * inbox: nats.conf lets only that user listen under `_INBOX_<user>.`, so an answer sent there
 * reaches no one else, whoever sent the request.
 */
export const WitnessLogins = ["witness", "route", "kernel"] as const

/** Whether an answer to `reply` reaches only a login that may read the witness view unsigned. */
export const witnessInbox = (reply: string | undefined): boolean =>
  reply !== undefined && WitnessLogins.some((user) => reply.startsWith(`${inboxOptionOf(user).inboxPrefix}.`))

/**
 * The confined agent login an answer to `reply` reaches (`agent-alice` -> session namespace
 * `alice`), or undefined for a shared or unknown inbox.
 */
const confinedNamespace = (reply: string | undefined): string | undefined => /^_INBOX_agent-([A-Za-z0-9_-]+)\./.exec(reply ?? "")?.[1]

/**
 * The agent view: what an unsigned read from an agent's login is told of a call, the status its
 * session's deliveries carry (ids, digest, generation, lifecycle, outcome and the admitted
 * result), never its arguments, presentation, contract, evidence or reasons.
 */
export const agentView = (f: HeldCallFacts) => {
  const v = heldView("proposer", f)
  return {
    held_id: v.held_id,
    session_id: v.session_id,
    turn_id: v.turn_id,
    call_id: v.call_id,
    continuation_ref: v.continuation_ref,
    ...(v.continuation_digest !== undefined ? { continuation_digest: v.continuation_digest } : {}),
    tool: v.tool,
    call_digest: v.call_digest,
    generation: v.generation,
    created_at: v.created_at,
    expires_at: v.expires_at,
    lifecycle: v.lifecycle,
    readiness: v.readiness,
    execution: v.execution,
    result_admission: v.result_admission,
    continuation_delivery: v.continuation_delivery,
    delivery_id: v.delivery_id,
    outcome: v.outcome,
    ...("revoked_after_release" in v ? { revoked_after_release: v.revoked_after_release } : {}),
    ...(v.tool_ok !== undefined ? { tool_ok: v.tool_ok } : {}),
    ...("result" in v ? { result: v.result } : {})
  }
}

/**
 * `wk.v1.held.get`: a held call as its reader may see it (runtime/heldcall/Views.ts).
 *
 * - Signed (`reader`, a read bound to `held.get` of this call, its nonce good once): that
 *   principal's own view (admin, proposer or eligible witness); any other call is a 404, exactly
 *   as if it did not exist, and a read that does not prove is a 401. From a witness login
 *   (`WitnessLogins`) a reader adds only its own view: one that does not prove, or whose signer
 *   has no role, gets the witness view that login reads unsigned, never more.
 * - Unsigned from a witness login: the witness-facing view.
 * - Unsigned from any other inbox (an agent's login, the shared `_INBOX.`): the agent view of the
 *   caller's own calls, those whose results its login reads anyway: a confined agent
 *   (`agent-<ns>`) its namespace's sessions, the shared agent login every session. Never the
 *   witness view: arguments and presentations are read signed.
 */
export const get = (data: Uint8Array, reply?: string) =>
  Effect.gen(function* () {
    const req = yield* plainRequest(data, GetRequest)
    let signedRole: Role | null = null
    if (req.reader !== undefined) {
      // A signed read is checked before any load, so a bad proof never learns what exists.
      const proved = yield* readerFor(req.reader, { operation: "held.get", held_id: req.held_id })
      if (Either.isLeft(proved) && !witnessInbox(reply)) return yield* Effect.fail(new Rejected(proved.left))
      const loaded = yield* (yield* HeldCallStore).load(req.held_id)
      const facts = loaded === null || loaded.facts.spec === null ? null : loaded.facts
      signedRole = facts === null || Either.isLeft(proved) ? null : roleOf(proved.right, facts)
      if (facts === null || (signedRole === null && !witnessInbox(reply))) return notFound(req.held_id)
      return yield* viewReply(signedRole ?? "witness", facts)
    }
    const loaded = yield* (yield* HeldCallStore).load(req.held_id)
    const facts = loaded === null || loaded.facts.spec === null ? null : loaded.facts
    if (facts === null) return notFound(req.held_id)
    if (witnessInbox(reply)) return yield* viewReply("witness", facts)
    const ns = confinedNamespace(reply)
    if (ns !== undefined && !facts.spec!.session_id.startsWith(`${ns}.`)) return notFound(req.held_id)
    return { status: 200, view: "agent", held: agentView(facts) }
  })

const viewReply = (role: Role, facts: HeldCallFacts) =>
  Effect.map(Effect.flatMap(PolicyStore, (s) => s.current), (policy) => ({ status: 200, view: role, held: heldView(role, facts, progressOf(facts, policy, Date.now())) }))

/** Where the active rule stands with the approvals that count under the registry in force (absent without a rule). */
export const progressOf = (f: HeldCallFacts, policy: ActivePolicy, now: number) =>
  f.active_rule === null
    ? undefined
    : ruleProgress(
        f.active_rule,
        countingApprovals(f, { ...registryOf(policy), now })
      )
