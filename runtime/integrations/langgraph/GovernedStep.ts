import { interrupt } from "@langchain/langgraph"
import type { WitnessClient } from "../../client/Client.js"
import type { JsonObject } from "../../schema/Json.js"
import { governedCall, type CallIds, type GovernedOutcome } from "../GovernedCall.js"

/** What a graph interrupted by a held call carries to whoever resumes it. */
export interface HeldInterrupt {
  readonly held_id: string
  readonly summary: string
}

/**
 * Runs a tool call through the kernel from inside a LangGraph node. A call the kernel holds
 * interrupts the graph (`interrupt({held_id, summary})`). The value a resume passes back is never
 * authority: on every resume the node asks the kernel again (the same ids are the same held
 * call, so a re-run or a second concurrent resume cannot propose or run a second call), returns
 * the kernel's result once a witness has attested, and interrupts again while none has.
 * `waitMs`: how long a resumed node waits for a release in flight before interrupting again.
 */
export const governedStep = async (
  client: WitnessClient,
  ids: CallIds,
  tool: string,
  args: JsonObject,
  waitMs = 2_000,
  /** The graph's checkpoint for this step (at most 64 KiB): the kernel keeps it and returns it with the result. */
  continuation?: Uint8Array
): Promise<GovernedOutcome & { readonly continuation?: Uint8Array }> => {
  for (let resumed = 0; ; resumed++) {
    const outcome = await governedCall(client, ids, tool, args, resumed === 0 ? 0 : waitMs, continuation)
    if (outcome.status !== "held") return outcome
    // Throws (the graph parks here) unless this is a resumed run: then it returns the resume value, ignored.
    interrupt<HeldInterrupt, unknown>({ held_id: outcome.held_id, summary: outcome.summary })
  }
}
