import type { WitnessClient } from "../../runtime/client/Client.js"
import { eventually } from "./Stream.js"

/**
 * Applies a profile the way an organization does: at once when it only narrows; when it widens,
 * policy.apply answers 202 with a `kernel_policy_apply` held call, which a second admin approves.
 */
export const applyPolicyWitnessed = async (proposer: WitnessClient, approver: WitnessClient, profile: object): Promise<{ status: number; policy_epoch?: number; held_id?: string }> => {
  const held = (await proposer.applyPolicy(profile as never)) as { status: number; policy_epoch?: number; held_id?: string }
  const heldId = held.held_id
  if (held.status !== 202 || heldId === undefined) return held
  const approved = await approver.decide(heldId, "admin")
  if (approved.disposition !== "accepted") throw new Error(`approval of ${heldId}: ${JSON.stringify(approved)}`)
  const done = await eventually(async () => {
    const h = (await proposer.get(heldId)).held
    return h?.["lifecycle"] === "completed" && h
  })
  return { status: 200, policy_epoch: (done["result"] as { policy_epoch: number }).policy_epoch, held_id: heldId }
}
