import type { Envelope } from "../../schema/Envelope.js"
import type { EventOf } from "../../schema/Events.js"
import type { HeldCallFacts } from "../../schema/Facts.js"
import type { EditPayload } from "../../schema/Requests.js"
import { conflict, notFound, type Reply } from "../../schema/Reply.js"
import { callDigest, jcsDigest } from "../../schema/Canonical.js"
import { EventIds } from "../EventIds.js"
import type { WitnessRegistry } from "../Counting.js"
import { judgeWitnessBinding } from "./WitnessBinding.js"
import { approvingWitnesses } from "../Reconciler.js"
import { isReservedTool } from "../../schema/Profile.js"
import { answer, atOf, type DecideContext, type Decision } from "./Decision.js"

/** `wk.v1.held.edit`: a witness's changed arguments for the call it was shown. */
export interface Edit {
  readonly _tag: "Edit"
  readonly payload: EditPayload
  readonly envelope: Envelope
}

/**
 * Edit on approve. A witness the contract admits as an approver (registered with the class it
 * signs as, independent of the proposer; never a veto-only or evidence-only class), bound to the
 * current generation, call and contract of a held, undispatched call, proposes other arguments for
 * the same tool: they become the next generation (`call.edited`), adjudicated from the start, its
 * earlier evidence void. The edited call is a proposal of its editor as well as of the agent: it
 * is released only by the contract it was held with (joined with whatever its own arguments
 * need), never on an ALLOW alone, and no approval of an editor's counts for it. The delivery
 * tells the agent who edited what. A `kernel_*` call (a policy change) is never edited. The same
 * signed edit again is a duplicate; an edit to the same arguments is refused.
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
  if (f.spec !== null && isReservedTool(f.spec.tool)) return { status: 422, disposition: "invalid", reason: `a ${f.spec.tool} call is not edited: propose the change again, whole` }
  const refused = judgeWitnessBinding(f, p, envelope, registry, now, "edit")
  if (refused !== null) return refused
  // An edit proposes a call; only a principal whose approval the contract counts may propose one.
  const approvers = approvingWitnesses(f.witness_contract!)
  if (!approvers.classes.includes(p.class) && !approvers.principals.includes(p.principal))
    return { status: 422, disposition: "invalid", reason: `class '${p.class}' may not edit: the contract admits it only to veto or give evidence, and only an approver may edit` }
  if (callDigest(f.spec!.tool, p.args) === f.spec!.call_digest) return conflict("same_call", "the edit proposes the arguments the call already has; approve it instead")
  return null
}
