import type { EventOf } from "../../schema/Events.js"
import type { HeldCallFacts } from "../../schema/Facts.js"
import { EventIds } from "../EventIds.js"
import { answer, atOf, type DecideContext, type Decision } from "./Decision.js"

/** A policy change reached an open call: it is judged again under `epoch`. */
export interface ChangeEpoch {
  readonly _tag: "ChangeEpoch"
  readonly epoch: number
}

/**
 * Records `policy.epoch_changed` on an open call that has not seen `epoch`, and drives it (it is
 * adjudicated again). A call already judged under `epoch` or later, or ended, is left alone; one
 * that saw the epoch but was not judged under it yet is driven without a new event.
 */
export const decideChangeEpoch = (f: HeldCallFacts, { epoch }: ChangeEpoch, ctx: DecideContext): Decision => {
  if (f.spec === null || f.lifecycle !== "open" || f.policy_epoch_checked >= epoch) return answer({ status: 200 })
  if (f.policy_epoch >= epoch) return { reply: { status: 200 }, events: [], drive: "cached" }
  const changed: EventOf<"policy.epoch_changed"> = {
    held_id: f.held_id,
    generation: f.generation,
    at: atOf(ctx),
    type: "policy.epoch_changed",
    event_id: EventIds.policyEpochChanged(f.held_id, epoch),
    policy_epoch: epoch
  }
  return { reply: { status: 200 }, events: [changed], drive: "cached" }
}
