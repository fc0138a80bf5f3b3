import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { nuid } from "@nats-io/transport-node"
import type { Delivery, ProposeReply, WitnessClient } from "../../client/Client.js"
import type { JsonObject } from "../../schema/Json.js"
import { KernelVersion } from "../../observability/KernelVersion.js"
import type { ListedTool } from "./ToolCatalog.js"
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js"
import type { OnBehalfOf } from "../../schema/IdentityBinding.js"

export interface GoverningOptions {
  /** Signs every proposal as the configured principal. */
  readonly client: WitnessClient
  readonly tools: ReadonlyArray<ListedTool>
  readonly sessionId: string
  readonly holdWaitMs: number
  readonly gatewayUrl?: string
  /**
   * Behind an OAuth-protected endpoint: the verified token a request carried, which every
   * proposal names (`on_behalf_of`), or why the request may not propose (a tool error).
   */
  readonly behalfOf?: (auth: AuthInfo | undefined) => OnBehalfOf | string
}

/** The follow-up tool a client calls for a held call's result. */
export const ResultTool = "wk_result"

const text = (t: string, isError = false, structured?: Record<string, unknown>): CallToolResult => ({
  content: [{ type: "text", text: t }],
  ...(isError ? { isError: true } : {}),
  ...(structured !== undefined ? { structuredContent: structured } : {})
})

const reasonsText = (reasons: ReadonlyArray<{ by: string; reason: string }> | undefined) => (reasons ?? []).map((r) => `${r.reason} (${r.by})`).join("; ") || "no reason given"

/** What the kernel executed, as the MCP result: the upstream's own result, unless it was quarantined or failed. */
const executedResult = (r: { admission: "admitted" | "quarantined" | null; result: unknown; ok?: boolean; error?: string; quarantine?: { by: string; reason: string } }, heldId: string): CallToolResult => {
  if (r.admission === "quarantined") return text(`the result was quarantined by ${r.quarantine?.by ?? "policy"} (${r.quarantine?.reason ?? "no reason given"}); its bytes stay in the kernel (held call ${heldId})`, true, { held_id: heldId, status: "quarantined" })
  if (r.ok === false) return text(`the tool failed: ${r.error ?? "no error text"}`, true, { held_id: heldId, status: "tool_failed" })
  const result = r.result as Partial<CallToolResult> | null
  return result !== null && typeof result === "object" && Array.isArray(result.content) ? (result as CallToolResult) : text(JSON.stringify(r.result))
}

/** A delivered end of a held call as the MCP result. */
const deliveredResult = (d: Delivery): CallToolResult => {
  switch (d.outcome) {
    case "completed":
    case "tool_failed":
      return executedResult({ admission: d.admission, result: d.result, ...(d.ok !== undefined ? { ok: d.ok } : {}), ...(d.outcome === "tool_failed" ? { ok: false, error: String((d as { error?: unknown }).error ?? "the tool reported a failure") } : {}) }, d.held_id)
    case "denied":
      return text(`denied by the witnesses: ${reasonsText(d.reasons)}`, true, { held_id: d.held_id, status: "denied" })
    default:
      return text(`the held call ended ${d.outcome} without running`, true, { held_id: d.held_id, status: d.outcome })
  }
}

/**
 * An MCP server whose every `tools/call` is a signed proposal to the kernel. ALLOW answers with
 * the upstream tool's result (run by the tool bridge, under the kernel's idempotency key); DENY
 * is a tool error with the reasons; a held call is waited for up to `holdWaitMs` (with progress
 * notifications when the client sent a progress token), and otherwise answered "held" with its
 * id and inbox link; `wk_result` fetches its delivered result later.
 */
export const governingServer = (opts: GoverningOptions): Server => {
  const server = new Server({ name: "witness-kernel", version: KernelVersion }, { capabilities: { tools: {} } })
  const byName = new Map(opts.tools.map((t) => [t.name, t]))
  // The link ends the text, on a line of its own, so no punctuation sticks to it.
  const inbox = (heldId: string) => (opts.gatewayUrl === undefined ? "" : `\nApprove or reject it in the inbox: ${opts.gatewayUrl.replace(/\/$/, "")}/inbox/#/held/${heldId}`)

  /** The upstream tools the kernel grants the principal now; all of them if the grants cannot be read (the kernel still decides each call). */
  const granted = async (): Promise<ReadonlyArray<ListedTool>> => {
    const r = await opts.client.grants().catch(() => null)
    if (r === null || r.status !== 200 || r.tools === undefined) return opts.tools
    const names = new Set(r.tools)
    return opts.tools.filter((t) => names.has(t.name))
  }

  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      ...(await granted()).map((t) => ({ name: t.name, description: `${t.description} (governed by Witness Kernel: ${t.server}/${t.upstreamName})`, inputSchema: t.inputSchema, ...(t.annotations !== undefined ? { annotations: t.annotations } : {}) })),
      {
        name: ResultTool,
        description: "The result of a governed call that was held for a witness, once it is released (or where it stands).",
        inputSchema: { type: "object" as const, properties: { held_id: { type: "string", description: "the held_id a held answer named" } }, required: ["held_id"] },
        annotations: { readOnlyHint: true, idempotentHint: true }
      }
    ]
  }))

  /**
   * Waits for a held call's delivery up to `ms`, sending progress while it waits (the first at
   * once, each naming the held id, so a client that gives up waiting can still ask `wk_result`);
   * null when it is still held.
   */
  const awaitDelivery = async (heldId: string, ms: number, progress: ((n: number, heldId: string) => Promise<void>) | undefined): Promise<Delivery | null> => {
    if (ms <= 0) return null
    let tick = 0
    if (progress !== undefined) void progress(tick, heldId).catch(() => undefined)
    // A beat per second (sooner on a short wait), so a client with a timeout that resets on progress keeps waiting.
    const timer = progress === undefined ? undefined : setInterval(() => void progress(++tick, heldId).catch(() => undefined), Math.min(1000, Math.max(100, ms / 3)))
    try {
      return await opts.client.result(heldId, { sessionId: opts.sessionId, timeoutMs: ms })
    } catch {
      return null
    } finally {
      if (timer !== undefined) clearInterval(timer)
    }
  }

  const heldAnswer = (heldId: string, why: string): CallToolResult =>
    text(`held for a witness: ${why}. Held call ${heldId}. Call ${ResultTool} with {"held_id": "${heldId}"} for its result once released.${inbox(heldId)}`, false, { held_id: heldId, status: "held" })

  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    const args = (req.params.arguments ?? {}) as Record<string, unknown>
    const token = req.params._meta?.progressToken
    const progress =
      token === undefined
        ? undefined
        : (n: number, heldId: string) => extra.sendNotification({ method: "notifications/progress", params: { progressToken: token, progress: n, message: `held for a witness: held call ${heldId} (${ResultTool} with {"held_id": "${heldId}"} gives its result)` } })
    if (req.params.name === ResultTool) {
      const heldId = typeof args["held_id"] === "string" ? args["held_id"] : ""
      if (!/^h_[0-9a-f]{32}$/.test(heldId)) return text("held_id: expected the held_id of a held answer (h_ and 32 hex digits)", true)
      const d = await awaitDelivery(heldId, Math.min(opts.holdWaitMs, 5_000), progress)
      return d === null ? heldAnswer(heldId, "still waiting") : deliveredResult(d)
    }
    const tool = byName.get(req.params.name)
    if (tool === undefined) return text(`no governed tool ${req.params.name}`, true)
    const behalf = opts.behalfOf?.(extra.authInfo)
    if (typeof behalf === "string") return text(`refused: ${behalf}`, true)
    let reply: ProposeReply
    try {
      reply = await opts.client.propose({ session_id: opts.sessionId, turn_id: "mcp", call_id: nuid.next().toLowerCase().replace(/[^a-z0-9]/g, ""), tool: tool.name, args: args as JsonObject, ...(behalf !== undefined ? { on_behalf_of: behalf } : {}) })
    } catch (e) {
      return text(`the kernel did not answer: ${e instanceof Error ? e.message : String(e)}`, true)
    }
    switch (reply.status) {
      case 200:
        return executedResult(reply, reply.held_id)
      case 403:
        return "reasons" in reply ? text(`denied: ${reasonsText(reply.reasons)}`, true, { held_id: reply.held_id, status: "denied" }) : text(`refused: ${reply.error.message}`, true)
      case 202: {
        if (!("outcome" in reply) || reply.outcome !== "held") return text(JSON.stringify(reply))
        const d = await awaitDelivery(reply.held_id, opts.holdWaitMs, progress)
        return d === null ? heldAnswer(reply.held_id, reply.witness_request.contract?.summary ?? "policy requires an attestation") : deliveredResult(d)
      }
      default:
        return text(`the kernel refused the call (${reply.status}): ${"error" in reply ? reply.error.message : JSON.stringify(reply)}`, true)
    }
  })
  return server
}
