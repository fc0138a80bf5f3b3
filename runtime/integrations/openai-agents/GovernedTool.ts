import { tool, type FunctionTool, type RunToolApprovalItem } from "@openai/agents"
import { z } from "zod"
import type { WitnessClient } from "../../client/Client.js"
import type { JsonObject } from "../../schema/Json.js"
import { governedCall, idToken, resumeHeld, type GovernedOutcome } from "../GovernedCall.js"

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
/** The held call behind an interruption: what a person needs to find it in the inbox. */
export interface HeldInterruption {
  readonly held_id: string
  readonly summary: string
}

/**
 * The held calls this process's governed tools turned into interruptions, by the SDK's call id.
 * The SDK builds an interruption from the model's call, not from `needsApproval`'s answer, so
 * the held id is kept here and read back with `heldCallOf`.
 */
const heldByCallId = new Map<string, HeldInterruption>()

/** The held call behind a run's interruption (`result.interruptions[i]`), if a governed tool of this process made it. */
export const heldCallOf = (interruption: RunToolApprovalItem): HeldInterruption | undefined => {
  const callId = (interruption.rawItem as { callId?: unknown }).callId
  return typeof callId === "string" ? heldByCallId.get(callId) : undefined
}

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
      if (outcome.status === "held" && callId !== undefined) heldByCallId.set(callId, { held_id: outcome.held_id, summary: outcome.summary })
      return outcome.status === "held"
    },
    execute: async (input, _ctx, details) => {
      const callId = details?.toolCall?.callId ?? "call"
      const known = decided.get(callId)
      decided.delete(callId)
      if (known !== undefined && known.status !== "held") return known
      const outcome = await governedCall(opts.client, idsOf(callId), opts.tool, input as JsonObject, opts.waitMs ?? 5_000)
      if (outcome.status !== "held") heldByCallId.delete(callId)
      return outcome
    }
  })
}

export interface HeldResultToolOptions {
  /** Reads the held calls of this client's principal. */
  readonly client: WitnessClient
  /** Where the held calls' results are delivered (the `sessionId` of their governed tools). */
  readonly sessionId: string
  /** How long the tool waits for a release in flight before answering `{status: "held"}` (default 0). */
  readonly waitMs?: number
}

/**
 * The tool a model calls, on a later run, with the `held_id` a governed tool answered
 * `{status: "held"}` with (or `heldCallOf` read off an interruption): the call's result once a
 * witness released it, `held` while it waits, or how it ended. It resumes by held id: nothing is
 * proposed again and the model's new call id does not matter. It needs no approval: reading is
 * not authority.
 */
export const heldResultTool = (opts: HeldResultToolOptions): FunctionTool<unknown, z.ZodObject, GovernedOutcome> =>
  tool({
    name: "wk_result",
    description: "The result of a tool call that was held for a witness, by the held_id its answer named: the result once released, or where it stands.",
    parameters: z.object({ held_id: z.string().describe("the held_id of a held answer") }) as z.ZodObject,
    execute: async (input) => resumeHeld(opts.client, (input as { held_id: string }).held_id, { sessionId: opts.sessionId, waitMs: opts.waitMs ?? 0 })
  })
