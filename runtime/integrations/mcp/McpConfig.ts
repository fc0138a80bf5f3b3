import { Either, ParseResult, Schema } from "effect"
import { readFileSync, statSync } from "node:fs"

/** An upstream MCP server started over stdio. */
export const StdioUpstream = Schema.Struct({
  command: Schema.String.pipe(Schema.minLength(1)),
  args: Schema.optional(Schema.Array(Schema.String)),
  env: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  cwd: Schema.optional(Schema.String)
})

/** An upstream MCP server reached over streamable HTTP. */
export const HttpUpstream = Schema.Struct({ url: Schema.String.pipe(Schema.pattern(/^https?:\/\//, { message: () => "expected an http:// or https:// URL" })) })

export const Upstream = Schema.Union(StdioUpstream, HttpUpstream)
export type Upstream = typeof Upstream.Type

/** Upstream server names prefix their tools' kernel names (`<server>_<tool>`), so they are lowercase tokens. */
export const ServerName = Schema.String.pipe(Schema.pattern(/^[a-z][a-z0-9_]{0,30}$/, { message: () => "server names are lowercase letters, digits and '_', starting with a letter (at most 31)" }))

/**
 * `wk mcp --config FILE`: who the governed MCP client acts as, where the kernel is, and which
 * upstream servers to govern.
 */
export const McpConfig = Schema.Struct({
  /** The principal every proposal is signed as (its key: `key_file`, else its dev key). */
  principal: Schema.String.pipe(Schema.pattern(/^[a-z]+:[A-Za-z0-9_.-]+$/, { message: () => "expected a principal such as agent:alice" })),
  key_file: Schema.optional(Schema.String),
  /** The session results are delivered to (one token or a namespaced `alice.mcp`). */
  session_id: Schema.optionalWith(Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+){0,7}$/)), { default: () => "mcp" }),
  /** How long a `tools/call` waits for a held call's release before it answers "held". */
  hold_wait_ms: Schema.optionalWith(Schema.Int.pipe(Schema.between(0, 600_000)), { default: () => 10_000 }),
  /** The HTTP gateway's base URL: a held answer links to its inbox. */
  gateway_url: Schema.optional(Schema.String),
  /** The upstreams, connected to list their tools (the same user as the agent; for development)... */
  servers: Schema.optional(Schema.Record({ key: ServerName, value: Upstream })),
  /** ...or the tool catalog the bridge writes: the agent side then never starts or reaches an upstream. */
  catalog: Schema.optional(Schema.String.pipe(Schema.minLength(1)))
}).pipe(Schema.filter((c) => (c.servers === undefined) !== (c.catalog === undefined) || { path: ["servers"], message: "give either servers (the upstreams) or catalog (the tool catalog the bridge writes), not both and not neither" }))
export type McpConfig = typeof McpConfig.Type

/**
 * `wk mcp-bridge --config FILE`: the tool bridge, a process of its own (its own OS user or
 * container in production), with what the agent must never read: the bridge's NATS login and the
 * key it signs tool replies with. The file must be readable by its owner only (mode 0600).
 */
export const BridgeConfig = Schema.Struct({
  /** The bridge's service principal: registered with class `tool:<tool>` for each tool it serves. */
  principal: Schema.String.pipe(Schema.pattern(/^[a-z]+:[A-Za-z0-9_.-]+$/, { message: () => "expected a principal such as svc:mcp-bridge" })),
  /** The key it signs replies with (`wk keygen --out`); default the principal's dev key. */
  key_file: Schema.optional(Schema.String),
  /** Its NATS user: a tool service allowed only these tools' subjects (`wk mcp-bridge --profile` prints the entry). */
  nats: Schema.Struct({ user: Schema.String.pipe(Schema.minLength(1)), pass: Schema.String.pipe(Schema.minLength(1)) }),
  /** Where to write the tool catalog the agent-side `wk mcp` lists tools from (no secrets: readable by the agent). */
  catalog: Schema.optional(Schema.String.pipe(Schema.minLength(1))),
  servers: Schema.Record({ key: ServerName, value: Upstream })
})
export type BridgeConfig = typeof BridgeConfig.Type

export const issueOf = (source: string, e: ParseResult.ParseError): string => {
  const issue = ParseResult.ArrayFormatter.formatErrorSync(e)[0]
  return `${source}: ${issue === undefined ? e.message : `${issue.path.length > 0 ? issue.path.join(".") : "(top)"}: ${issue.message}`}`
}

/** The bridge config in `text`, or one line naming the field that is wrong. */
export const decodeBridgeConfig = (text: string, source = "bridge config"): Either.Either<BridgeConfig, string> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    return Either.left(`${source}: not JSON (${e instanceof Error ? e.message : String(e)})`)
  }
  return Schema.decodeUnknownEither(BridgeConfig)(json, { onExcessProperty: "error" }).pipe(Either.mapLeft((e) => issueOf(source, e)))
}

/** Reads the bridge config at `path`; refused when anyone but its owner may read it. */
export const loadBridgeConfig = (path: string): Either.Either<BridgeConfig, string> => {
  let text: string
  try {
    const mode = statSync(path).mode & 0o777
    if ((mode & 0o077) !== 0) return Either.left(`${path}: mode ${mode.toString(8).padStart(4, "0")} lets others read the bridge's NATS password and signing key: chmod 600 ${path}`)
    text = readFileSync(path, "utf8")
  } catch (e) {
    return Either.left(`cannot read ${path}: ${e instanceof Error ? e.message : String(e)}`)
  }
  return decodeBridgeConfig(text, path)
}

/** The config in `text` (JSON), or one line naming the field that is wrong. */
export const decodeMcpConfig = (text: string, source = "config"): Either.Either<McpConfig, string> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    return Either.left(`${source}: not JSON (${e instanceof Error ? e.message : String(e)})`)
  }
  if (json !== null && typeof json === "object" && "bridge" in json) {
    return Either.left(`${source}: bridge: the bridge's NATS login does not belong in the agent's config (whoever reads it could answer for the tools); run the bridge as its own process: wk mcp-bridge --config wk-bridge.json (docs/mcp.md)`)
  }
  return Schema.decodeUnknownEither(McpConfig)(json, { onExcessProperty: "error" }).pipe(Either.mapLeft((e) => issueOf(source, e)))
}

/** Reads and decodes the config file at `path`. */
export const loadMcpConfig = (path: string): Either.Either<McpConfig, string> => {
  let text: string
  try {
    text = readFileSync(path, "utf8")
  } catch (e) {
    return Either.left(`cannot read ${path}: ${e instanceof Error ? e.message : String(e)}`)
  }
  return decodeMcpConfig(text, path)
}
