import { tool, type Tool } from "ai"
import { z } from "zod"
import type { WitnessClient } from "../../client/Client.js"
import type { JsonObject } from "../../schema/Json.js"
import { governedCall, idToken, resumeHeld, type GovernedOutcome } from "../GovernedCall.js"

export interface GovernedToolOptions<INPUT extends JsonObject> {
  /** Signs every call as the agent's principal. */
  readonly client: WitnessClient
  /** The kernel's name of the tool (its grant, rules and tool service). */
  readonly tool: string
  readonly description: string
  readonly inputSchema: Tool<INPUT, GovernedOutcome>["inputSchema"]
  /** Where held calls' results are delivered. */
  readonly sessionId: string
  /** The agent's turn (default `ai`): with the model's tool call id it names the call. */
  readonly turnId?: string
  /** How long `execute` waits for a held call's release before it returns `{status: "held"}` (default 0). */
  readonly waitMs?: number
}

/**
 * A Vercel AI SDK tool whose `execute` goes through the kernel: the model's tool call becomes a
 * signed proposal (its id is the model's tool call id), and the model sees the kernel's outcome:
 * the tool's result, or denied with reasons, quarantined, or held with the held id. A held call
 * is run only once a witness attests; calling the tool again with the same tool call id returns
 * where it stands, never a second run. A model that asks again on a later turn (with a new tool
 * call id) asks `heldResultTool` with the held id instead.
 */
export const governedTool = <INPUT extends JsonObject>(opts: GovernedToolOptions<INPUT>): Tool<INPUT, GovernedOutcome> =>
  tool<INPUT, GovernedOutcome>({
    description: opts.description,
    inputSchema: opts.inputSchema,
    execute: (input, { toolCallId }) =>
      governedCall(opts.client, { session_id: opts.sessionId, turn_id: idToken(opts.turnId ?? "ai"), call_id: idToken(toolCallId) }, opts.tool, input, opts.waitMs ?? 0)
  })

export interface HeldResultToolOptions {
  /** Reads the held calls of this client's principal. */
  readonly client: WitnessClient
  /** Where the held calls' results are delivered (the `sessionId` of their governed tools). */
  readonly sessionId: string
  /** How long `execute` waits for a release in flight before answering `{status: "held"}` (default 0). */
  readonly waitMs?: number
}

/**
 * The tool a model calls, on a later turn, with the `held_id` a governed tool answered
 * `{status: "held"}` with: the call's result once a witness released it, `held` while it waits,
 * or how it ended. It resumes by held id (`resumeHeld`): the model's new tool call id does not
 * matter, nothing is proposed again, and nothing in its input is authority.
 */
export const heldResultTool = (opts: HeldResultToolOptions): Tool<{ held_id: string }, GovernedOutcome> =>
  tool<{ held_id: string }, GovernedOutcome>({
    description: "The result of a tool call that was held for a witness, by the held_id its answer named: the result once released, or where it stands.",
    inputSchema: z.object({ held_id: z.string().describe("the held_id of a held answer") }),
    execute: ({ held_id }) => resumeHeld(opts.client, held_id, { sessionId: opts.sessionId, waitMs: opts.waitMs ?? 0 })
  })
