import type { Envelope } from "../../schema/Envelope.js"
import type { EventOf } from "../../schema/Events.js"
import type { HeldCallFacts } from "../../schema/Facts.js"
import type { EditPayload } from "../../schema/Requests.js"
import { conflict, notFound, type Reply } from "../../schema/Reply.js"
import { callDigest, jcsDigest } from "../../schema/Canonical.js"
import { EventIds } from "../EventIds.js"
import type { WitnessRegistry } from "../Counting.js"
import { judgeWitnessBinding } from "./WitnessBinding.js"
import { answer, atOf, type DecideContext, type Decision } from "./Decision.js"

/** `wk.v1.held.edit`: a witness's changed arguments for the call it was shown. */
export interface Edit {
  readonly _tag: "Edit"
  readonly payload: EditPayload
  readonly envelope: Envelope
}

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
  const refused = judgeWitnessBinding(f, p, envelope, registry, now, "edit")
  if (refused !== null) return refused
  if (callDigest(f.spec!.tool, p.args) === f.spec!.call_digest) return conflict("same_call", "the edit proposes the arguments the call already has; approve it instead")
  return null
}
