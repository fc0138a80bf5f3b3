import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js"
import { KernelVersion } from "../../observability/KernelVersion.js"
import type { Upstream } from "./McpConfig.js"

/** Hints an upstream tool declares (MCP tool annotations; absent hints take the spec's defaults). */
export interface ToolHints {
  readonly readOnly: boolean
  /** Spec default: true (a tool that is not read-only may destroy). */
  readonly destructive: boolean
  /** Spec default: false. */
  readonly idempotent: boolean
}

/** An upstream tool as the kernel knows it: its kernel name, where it lives, and how to call it. */
export interface GovernedTool {
  /** `<server>_<tool>`, lowercased, other characters as `_`: a kernel tool name and NATS token. */
  readonly name: string
  readonly server: string
  readonly upstreamName: string
  readonly description: string
  readonly inputSchema: Tool["inputSchema"]
  readonly annotations: Tool["annotations"]
  readonly hints: ToolHints
  readonly call: (args: Record<string, unknown>) => Promise<CallToolResult>
}

/** The kernel name of upstream tool `tool` of server `server`. */
export const governedName = (server: string, tool: string): string => `${server}_${tool.toLowerCase().replace(/[^a-z0-9_]/g, "_")}`.slice(0, 100)

export const hintsOf = (annotations: Tool["annotations"]): ToolHints => ({
  readOnly: annotations?.readOnlyHint === true,
  destructive: annotations?.readOnlyHint === true ? false : annotations?.destructiveHint !== false,
  idempotent: annotations?.readOnlyHint === true || annotations?.idempotentHint === true
})

/** Connected upstream servers and their tools; `close` stops them. */
export interface Upstreams {
  readonly tools: ReadonlyArray<GovernedTool>
  readonly close: () => Promise<void>
}

const transportOf = (u: Upstream) =>
  "url" in u
    ? new StreamableHTTPClientTransport(new URL(u.url))
    : new StdioClientTransport({ command: u.command, args: [...(u.args ?? [])], env: { ...getDefaultEnvironment(), ...(u.env ?? {}) }, ...(u.cwd !== undefined ? { cwd: u.cwd } : {}), stderr: "ignore" })

/**
 * Starts (stdio) or connects to (HTTP) every upstream server and lists its tools. Two tools
 * whose kernel names collide are refused by name: each kernel name must mean one tool.
 */
export const connectUpstreams = async (servers: Readonly<Record<string, Upstream>>): Promise<Upstreams> => {
  const clients: Array<Client> = []
  const tools: Array<GovernedTool> = []
  try {
    for (const [server, upstream] of Object.entries(servers)) {
      const client = new Client({ name: "witness-kernel-mcp", version: KernelVersion })
      await client.connect(transportOf(upstream)).catch((e: unknown) => {
        throw new Error(`upstream ${server}: cannot connect (${e instanceof Error ? e.message : String(e)})`)
      })
      clients.push(client)
      let cursor: string | undefined
      do {
        const page = await client.listTools(cursor === undefined ? {} : { cursor })
        for (const t of page.tools) {
          const name = governedName(server, t.name)
          const clash = tools.find((o) => o.name === name)
          if (clash !== undefined) throw new Error(`upstream ${server}: tool '${t.name}' and ${clash.server}'s '${clash.upstreamName}' would both be '${name}'`)
          tools.push({
            name,
            server,
            upstreamName: t.name,
            description: t.description ?? t.title ?? t.name,
            inputSchema: t.inputSchema,
            annotations: t.annotations,
            hints: hintsOf(t.annotations),
            call: (args) => client.callTool({ name: t.name, arguments: args }) as Promise<CallToolResult>
          })
        }
        cursor = page.nextCursor
      } while (cursor !== undefined)
    }
  } catch (e) {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)))
    throw e
  }
  return { tools, close: async () => void (await Promise.all(clients.map((c) => c.close().catch(() => undefined)))) }
}
