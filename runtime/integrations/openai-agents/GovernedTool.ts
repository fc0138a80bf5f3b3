import { tool, type FunctionTool } from "@openai/agents"
import type { z } from "zod"
import type { WitnessClient } from "../../client/Client.js"
import type { JsonObject } from "../../schema/Json.js"
import { governedCall, idToken, type GovernedOutcome } from "../GovernedCall.js"

export interface GovernedToolOptions<P extends z.ZodObject> {
  readonly client: WitnessClient
  /** The kernel's name of the tool; also the name the model sees. */
  readonly tool: string
  readonly description: string
  readonly parameters: P
  readonly sessionId: string
  /** The agent's turn (default `agents`): with the model's call id it names the call. */
  readonly turnId?: string
  /** How long a resumed run waits for the kernel's delivery of a held call (default 5 s). */
  readonly waitMs?: number
}

/**
 * An OpenAI Agents SDK tool whose approvals are the kernel's held calls. `needsApproval`
 * proposes the call: an ALLOW has already run (once, by the kernel) and needs no approval; a
 * call the kernel holds for a witness becomes the run's interruption. The SDK's approval of that
 * interruption is not authority: `execute` asks the kernel again (the same ids are the same held
 * call) and returns the kernel's delivered result once a witness has attested, or
 * `{status: "held"}` while none has. Rejecting the interruption in the SDK never runs the tool.
 */
export const governedTool = <P extends z.ZodObject>(opts: GovernedToolOptions<P>): FunctionTool<unknown, z.ZodObject, GovernedOutcome> => {
  const idsOf = (callId: string | undefined) => ({ session_id: opts.sessionId, turn_id: idToken(opts.turnId ?? "agents"), call_id: idToken(callId ?? "call") })
  // What the proposal in `needsApproval` came to, by call id, so an ALLOW is not proposed twice.
  const decided = new Map<string, GovernedOutcome>()
  return tool({
    name: opts.tool,
    description: opts.description,
    parameters: opts.parameters as z.ZodObject,
    needsApproval: async (_ctx, input, callId) => {
      const outcome = await governedCall(opts.client, idsOf(callId), opts.tool, input as JsonObject)
      decided.set(callId ?? "call", outcome)
      return outcome.status === "held"
    },
    execute: async (input, _ctx, details) => {
      const callId = details?.toolCall?.callId ?? "call"
      const known = decided.get(callId)
      decided.delete(callId)
      if (known !== undefined && known.status !== "held") return known
      return governedCall(opts.client, idsOf(callId), opts.tool, input as JsonObject, opts.waitMs ?? 5_000)
    }
  })
}
