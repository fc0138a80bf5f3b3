import type { Envelope } from "../../schema/Envelope.js"
import type { EventOf } from "../../schema/Events.js"
import type { HeldCallFacts } from "../../schema/Facts.js"
import type { EditPayload } from "../../schema/Requests.js"
import { conflict, notFound, type Reply } from "../../schema/Reply.js"
import { callDigest, jcsDigest } from "../../schema/Canonical.js"
import { EventIds } from "../EventIds.js"
import { beforeDispatch, canonicalCall } from "../Facts.js"
import { admittedWitnesses } from "../Reconciler.js"
import type { WitnessRegistry } from "../Counting.js"
import { answer, atOf, SkewMs, type DecideContext, type Decision } from "./Decision.js"

/** `wk.v1.held.edit`: a witness's changed arguments for the call it was shown. */
export interface Edit {
  readonly _tag: "Edit"
  readonly payload: EditPayload
  readonly envelope: Envelope
}

const invalid = (reason: string): Reply => ({ status: 422, disposition: "invalid", reason })
const stale = (reason: string): Reply => ({ status: 409, disposition: "stale", reason })

/**
 * Edit on approve. A witness the contract admits (registered with the class it signs as,
 * independent of the proposer), bound to the current generation, call and contract of a held,
 * undispatched call, proposes other arguments for the same tool: they become the next generation
 * (`call.edited`), adjudicated from the start, its earlier evidence void. The edit approves
 * nothing: only an approval bound to the edited call's digest releases it, and the delivery tells
 * the agent who edited what. The same signed edit again is a duplicate; an edit to the same
 * arguments is refused.
 */
export const decideEdit = (f: HeldCallFacts, { payload: p, envelope }: Edit, ctx: DecideContext): Decision => {
  const spec = f.spec
  if (spec === null) return answer(notFound(f.held_id))
  const id = EventIds.edited(f.held_id, jcsDigest(p))
  if (f.seen.includes(id)) return { reply: { status: 200, disposition: "duplicate" }, events: [], drive: "fresh" }
  const refused = judgeEdit(f, p, envelope, ctx, ctx.now)
  if (refused !== null) return answer(refused)
  const edited = callDigest(spec.tool, p.args)
  const event: EventOf<"call.edited"> = {
    type: "call.edited",
    event_id: id,
    held_id: f.held_id,
    generation: f.generation + 1,
    at: atOf(ctx),
    witness: p.principal,
    class: p.class,
    tool: spec.tool,
    args: p.args,
    call_digest: edited,
    from_call_digest: spec.call_digest,
    ...(p.reason !== undefined ? { reason: p.reason } : {}),
    envelope
  }
  return { reply: { status: 202, disposition: "accepted", generation: f.generation + 1, call_digest: edited }, events: [event], drive: "cached" }
}

/**
 * Why an edit is refused on `f` at `now` under `registry` (null: it is accepted): the rule
 * `decideEdit` applies, and the auditor applies again to every recorded edit.
 */
export const judgeEdit = (f: HeldCallFacts, p: EditPayload, envelope: Envelope, registry: WitnessRegistry, now: number): Reply | null => {
  const spec = f.spec
  if (spec === null) return notFound(f.held_id)
  if (f.lifecycle !== "open") return stale(`the call is ${f.lifecycle}`)
  if (!beforeDispatch(f)) return stale("the call was already dispatched")
  if (p.held_id !== f.held_id) return invalid(`bound to ${p.held_id}, not this call`)
  if (p.generation !== f.generation) return stale(`bound to generation ${p.generation}; the current generation is ${f.generation}`)
  if (p.call_digest !== canonicalCall(f)?.call_digest) return stale("bound to another call digest")
  if (f.verdict !== "REQUIRE_WITNESS" || f.witness_contract === null) return stale("the call is not waiting for a witness")
  if (p.contract_digest !== f.contract_digest) return invalid("contract mismatch: bound to another witness contract")
  if (Date.parse(p.expires_at) <= now) return invalid(`edit expired at ${p.expires_at}`)
  if (Date.parse(p.issued_at) > now + SkewMs) return invalid(`issued_at ${p.issued_at} is more than ${SkewMs / 1000} s in the future (the allowed clock skew)`)
  if (p.principal === spec.principal || registry.keysOf(spec.principal).includes(envelope.key)) return invalid("witness is not independent of the proposer")
  if (!registry.classesOf(p.principal).includes(p.class)) return invalid(`principal '${p.principal}' is not registered with class '${p.class}'`)
  const admitted = admittedWitnesses(f.witness_contract)
  if (!admitted.classes.includes(p.class) && !admitted.principals.includes(p.principal)) return invalid(`wrong class: the contract does not accept class '${p.class}' or principal '${p.principal}'`)
  if (callDigest(spec.tool, p.args) === spec.call_digest) return conflict("same_call", "the edit proposes the arguments the call already has; approve it instead")
  return null
}
