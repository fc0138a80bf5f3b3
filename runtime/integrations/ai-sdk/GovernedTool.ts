import { tool, type Tool } from "ai"
import type { WitnessClient } from "../../client/Client.js"
import type { JsonObject } from "../../schema/Json.js"
import { governedCall, idToken, type GovernedOutcome } from "../GovernedCall.js"

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
 * where it stands, never a second run.
 */
export const governedTool = <INPUT extends JsonObject>(opts: GovernedToolOptions<INPUT>): Tool<INPUT, GovernedOutcome> =>
  tool<INPUT, GovernedOutcome>({
    description: opts.description,
    inputSchema: opts.inputSchema,
    execute: (input, { toolCallId }) =>
      governedCall(opts.client, { session_id: opts.sessionId, turn_id: idToken(opts.turnId ?? "ai"), call_id: idToken(toolCallId) }, opts.tool, input, opts.waitMs ?? 0)
  })
