import type { NatsConnection, Subscription } from "@nats-io/transport-node"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { Subjects } from "../../schema/Subjects.js"
import { signToolReply, type ToolReplySigner } from "../../schema/ToolReplySignature.js"
import type { GovernedTool } from "./Upstreams.js"

/** A tool service's answer to an invoke (docs/protocol.md, "Tool services"). */
type InvokeAnswer = { readonly ok: true; readonly result: CallToolResult } | { readonly ok: false; readonly error: string }

/** The text an upstream tool error carries, for the kernel's `error` field. */
export const errorTextOf = (r: CallToolResult): string =>
  r.content.flatMap((c) => (c.type === "text" ? [c.text] : [])).join("\n").slice(0, 2000) || "the upstream tool reported an error"

const encoder = new TextEncoder()

/**
 * The queue group every bridge subscribes in: several bridges (or `wk mcp bridge` processes) for
 * the same tools are replicas of one logical consumer, so each request reaches exactly one of them.
 */
export const ToolBridgeQueue = "wk-tool-bridges"

/**
 * Serves the kernel's tool subjects for upstream MCP tools: `invoke` calls the upstream tool at
 * most once per idempotency key in this process (a redelivered request with a key it has seen,
 * still running or done, gets the same answer). Read-back is served only for tools declared
 * read-only or idempotent, from the same record ("not applied" is safe to act on for them: the
 * kernel dispatches again). A tool that is neither gets no read-back: its profile rule says
 * `readback: false`, so an unknown outcome goes to a witness instead of a blind retry. Bridges
 * subscribe in one queue group (`ToolBridgeQueue`), so two bridges run a call once; with a
 * `signer`, every answer is signed by the bridge's service key (schema/ToolReplySignature.ts), and
 * a kernel that has the key registered for the tool accepts no other answer.
 */
export class ToolBridge {
  private readonly applied = new Map<string, Promise<InvokeAnswer>>()
  private readonly subs: Array<Subscription> = []
  /** Upstream calls made, by kernel tool name (what a test counts). */
  readonly upstreamCalls = new Map<string, number>()

  constructor(private readonly tools: ReadonlyArray<GovernedTool>, private readonly signer?: ToolReplySigner) {}

  private answer(op: "invoke" | "readback", tool: string, key: string, body: Record<string, unknown>): Uint8Array {
    return encoder.encode(JSON.stringify(this.signer === undefined ? body : signToolReply(op, tool, key, body, this.signer)))
  }

  serve(nc: NatsConnection): this {
    for (const tool of this.tools) {
      this.subs.push(
        nc.subscribe(Subjects.toolInvoke(tool.name), {
          queue: ToolBridgeQueue,
          callback: (e, m) => {
            // A subscription the server refused (a tool this NATS user may not serve) serves nothing.
            if (e !== null) return
            let req: { idempotency_key?: unknown; args?: unknown }
            try {
              req = m.json()
            } catch {
              return void m.respond(encoder.encode(JSON.stringify({ ok: false, error: "invoke body is not JSON" })))
            }
            const key = typeof req.idempotency_key === "string" ? req.idempotency_key : ""
            const args = req.args !== null && typeof req.args === "object" && !Array.isArray(req.args) ? (req.args as Record<string, unknown>) : {}
            void this.invoke(tool, key, args).then((answer) => m.respond(this.answer("invoke", tool.name, key, answer)))
          }
        })
      )
      if (!tool.hints.idempotent) continue
      this.subs.push(
        nc.subscribe(Subjects.toolReadback(tool.name), {
          queue: ToolBridgeQueue,
          callback: (e, m) => {
            if (e !== null) return
            const key = (m.json<{ idempotency_key?: string }>().idempotency_key) ?? ""
            const done = this.applied.get(key)
            if (done === undefined) return void m.respond(this.answer("readback", tool.name, key, { applied: false }))
            void done.then((a) => m.respond(this.answer("readback", tool.name, key, a.ok ? { applied: true, result: a.result } : { applied: false })))
          }
        })
      )
    }
    return this
  }

  private invoke(tool: GovernedTool, key: string, args: Record<string, unknown>): Promise<InvokeAnswer> {
    const seen = key === "" ? undefined : this.applied.get(key)
    if (seen !== undefined) return seen
    this.upstreamCalls.set(tool.name, (this.upstreamCalls.get(tool.name) ?? 0) + 1)
    const answer = tool.call(args).then(
      (r): InvokeAnswer => (r.isError === true ? { ok: false, error: errorTextOf(r) } : { ok: true, result: r }),
      (e: unknown): InvokeAnswer => ({ ok: false, error: `upstream ${tool.server} failed: ${e instanceof Error ? e.message : String(e)}` })
    )
    if (key !== "") this.applied.set(key, answer)
    return answer
  }

  stop(): void {
    this.subs.forEach((s) => s.unsubscribe())
  }
}
