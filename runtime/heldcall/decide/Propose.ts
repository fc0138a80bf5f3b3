import type { Envelope } from "../../schema/Envelope.js"
import type { EventOf } from "../../schema/Events.js"
import type { HeldCallFacts } from "../../schema/Facts.js"
import type { Ancestor } from "../../schema/HeldCallSpec.js"
import type { ProposeCall } from "../../schema/Requests.js"
import { conflict, type Reply } from "../../schema/Reply.js"
import { callDigest } from "../../schema/Canonical.js"
import { EventIds } from "../EventIds.js"
import { beforeDispatch } from "../Facts.js"
import { answer, atOf, type DecideContext, type Decision } from "./Decision.js"

/** The parent a nested call attached to, and the chain above it. */
export interface Edge {
  readonly parent_held_id: string
  readonly ancestors: ReadonlyArray<Ancestor>
  readonly parent_expires_at: string
}

/**
 * `wk.v1.calls.propose` on the call it names (a new call, the same proposal again, or an edit).
 * A `policy.apply` widening is a proposal of `kernel_policy_apply` built from the admin's request.
 */
export interface Propose {
  readonly _tag: "Propose"
  readonly payload: ProposeCall
  readonly envelope: Envelope
  /** The salt the held id was derived with (protocol/HeldIds.ts). */
  readonly salt: string
  /** The proposer's `expires_in_ms` preference, if any (its effective preferences). */
  readonly expiresInMs?: number
  /** Set for a nested call: the parent it attached to. */
  readonly edge?: Edge
}

/** The call's proposal is recorded (now or before): drive it to learn the answer. */
export const Recorded: Reply = { status: 200, recorded: true }

/** The generation of the call's last proposal: an edit supersedes it or a re-presentation of it. */
export const proposedGeneration = (f: HeldCallFacts): number => f.proposed_generation ?? f.generation

/**
 * Whether a proposal with a new call digest may become the next generation of an existing,
 * undispatched call. With `supersedes`, only when it names the generation it replaces (the last
 * proposal's or a later re-presentation of it). Without it (v1 clients), unless its digest is
 * one an earlier generation proposed: that is a superseded envelope coming back, refused so it
 * never reverts an edit or voids approvals.
 */
export const supersededProposal = (f: HeldCallFacts, supersedes: number | undefined, digest: string): Reply | undefined => {
  if (supersedes === undefined ? !(f.earlier_digests ?? []).includes(digest) : supersedes >= proposedGeneration(f) && supersedes <= f.generation) return undefined
  const named = supersedes === undefined ? "names no generation it supersedes and proposes an earlier generation's call again" : `supersedes generation ${supersedes}`
  return conflict(
    "superseded",
    `held call ${f.held_id} is at generation ${f.generation} with another call; this proposal ${named}. An edit sets payload.supersedes to the current generation`
  )
}

/**
 * The `call.proposed` event of generation `generation` of a call, from the agent's signed
 * request: the one place that maps a proposal onto the event (a proposal, an edit, a refused nested call).
 */
export const proposedEvent = (o: {
  readonly heldId: string
  readonly salt: string
  readonly generation: number
  readonly payload: ProposeCall
  readonly envelope: Envelope
  readonly digest: string
  readonly now: number
  readonly expiresAt: number
  readonly parent?: { readonly parent_held_id: string; readonly ancestors?: ReadonlyArray<Ancestor> }
}): EventOf<"call.proposed"> => {
  const p = o.payload
  const at = new Date(o.now).toISOString()
  return {
    type: "call.proposed",
    event_id: EventIds.proposed(o.heldId, o.generation),
    held_id: o.heldId,
    generation: o.generation,
    principal: p.principal,
    session_id: p.session_id,
    turn_id: p.turn_id,
    call_id: p.call_id,
    tool: p.tool,
    args: p.args,
    call_digest: o.digest,
    ...(p.continuation_ref !== undefined ? { continuation_ref: p.continuation_ref } : {}),
    ...(p.continuation_digest !== undefined ? { continuation_digest: p.continuation_digest } : {}),
    ...(p.preferences !== undefined ? { preferences: p.preferences } : {}),
    ...(o.parent !== undefined ? { parent_held_id: o.parent.parent_held_id, ...(o.parent.ancestors !== undefined ? { ancestors: o.parent.ancestors } : {}) } : {}),
    idempotency_key: `${o.heldId}:g${o.generation}`,
    held_id_salt: o.salt,
    created_at: at,
    expires_at: new Date(o.expiresAt).toISOString(),
    envelope: o.envelope,
    at
  }
}

/**
 * The same (principal, session, turn, call) with the same digest is the same call (`Recorded`,
 * nothing written). A different digest before dispatch is an edit, the next generation, when it
 * names the generation it supersedes or names none and is no earlier generation's call; after
 * dispatch, or on an ended call, it is refused (409). A nested call keeps its parent: another
 * `parent_held_id` is a different call and needs a new call id. A nested call never outlives the
 * call it serves.
 */
export const decidePropose = (f: HeldCallFacts, c: Propose, ctx: DecideContext): Decision => {
  const p = c.payload
  const heldId = f.held_id
  const digest = callDigest(p.tool, p.args)
  if (f.spec !== null && f.spec.parent_held_id !== c.edge?.parent_held_id) {
    return answer(conflict("dependency_mismatch", `held call ${heldId} ${f.spec.parent_held_id === undefined ? "is a root call" : `is a dependency of ${f.spec.parent_held_id}`}; a proposal with another parent_held_id needs a new call_id`))
  }
  if (f.spec !== null && f.spec.call_digest === digest) return { reply: Recorded, events: [], drive: "cached" }
  if (f.spec !== null && !beforeDispatch(f)) {
    return answer(
      f.lifecycle === "open" || f.lifecycle === "completed"
        ? conflict("already_dispatched", `held call ${heldId} was already dispatched; a changed proposal needs a new call_id`)
        : conflict(`call_${f.lifecycle}`, `held call ${heldId} is ${f.lifecycle}; a changed proposal needs a new call_id`)
    )
  }
  if (f.spec !== null) {
    const superseded = supersededProposal(f, p.supersedes, digest)
    if (superseded !== undefined) return answer(superseded)
  } else if (p.supersedes !== undefined) {
    return answer(conflict("superseded", `held call ${heldId} has no generation ${p.supersedes} to supersede`))
  }
  const edge = c.edge
  const ttl = Math.min(ctx.heldTtlMs, c.expiresInMs ?? Number.POSITIVE_INFINITY, edge === undefined ? Number.POSITIVE_INFINITY : Math.max(0, Date.parse(edge.parent_expires_at) - ctx.now))
  const event = proposedEvent({ heldId, salt: c.salt, generation: f.generation + 1, payload: p, envelope: c.envelope, digest, now: ctx.now, expiresAt: ctx.now + ttl, ...(edge !== undefined ? { parent: edge } : {}) })
  return { reply: Recorded, events: [event], drive: "cached" }
}

/** A nested call whose edge its parent refused: recorded all the same, proposed and denied at once, so it can be read and audited. */
export interface ProposeRefused {
  readonly _tag: "ProposeRefused"
  readonly payload: ProposeCall
  readonly envelope: Envelope
  readonly salt: string
  readonly reason: string
}

/**
 * Records a refused nested call as ended (it expires as it is proposed); a call that exists
 * already is left as it is. Either way it is driven: its denial reaches its parent.
 */
export const decideProposeRefused = (f: HeldCallFacts, c: ProposeRefused, ctx: DecideContext): Decision => {
  if (f.spec !== null) return { reply: Recorded, events: [], drive: "fresh" }
  const parent = { parent_held_id: c.payload.parent_held_id! }
  const proposed = proposedEvent({ heldId: f.held_id, salt: c.salt, generation: 1, payload: c.payload, envelope: c.envelope, digest: callDigest(c.payload.tool, c.payload.args), now: ctx.now, expiresAt: ctx.now, parent })
  const denied: EventOf<"call.denied"> = { held_id: f.held_id, generation: 1, at: atOf(ctx), type: "call.denied", event_id: EventIds.denied(f.held_id, 1), reasons: [{ by: "kernel", reason: c.reason }] }
  return { reply: Recorded, events: [proposed, denied], drive: "cached" }
}
