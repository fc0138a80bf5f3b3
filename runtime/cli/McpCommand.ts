import { Command, Options } from "@effect/cli"
import { connect } from "@nats-io/transport-node"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { Console, Effect, Either, Option } from "effect"
import { randomBytes } from "node:crypto"
import { natsOptionsFromUrl } from "../ledger/Nats.js"
import { inboxOptionOf } from "../schema/Subjects.js"
import { log } from "../observability/Log.js"
import { loadMcpConfig, type McpConfig } from "../integrations/mcp/McpConfig.js"
import { connectUpstreams } from "../integrations/mcp/Upstreams.js"
import { ToolBridge } from "../integrations/mcp/ToolBridge.js"
import { governingServer } from "../integrations/mcp/GoverningServer.js"
import { profileFor } from "../integrations/mcp/ProfileSnippet.js"
import { CliError, connectClient, connectFailure, serverUrl } from "./Connect.js"
import { ExitCode } from "./Exit.js"
import { toolUserEntry } from "./NatsUsers.js"

const configOption = Options.file("config", { exists: "yes" }).pipe(Options.withDescription("the wk mcp config file (JSON: principal, servers, bridge, ...; docs/mcp.md)"))

const configAt = (path: string) =>
  Either.match(loadMcpConfig(path), { onLeft: (message) => Effect.fail(new CliError({ message, exit: ExitCode.usage })), onRight: (c) => Effect.succeed(c) })

const upstreamsOf = (cfg: McpConfig) =>
  Effect.acquireRelease(
    Effect.tryPromise({ try: () => connectUpstreams(cfg.servers), catch: (e) => new CliError({ message: e instanceof Error ? e.message : String(e), exit: ExitCode.unreachable }) }),
    (u) => Effect.promise(() => u.close())
  )

/** The tool bridge on its own NATS user (a tool service), when the config names one. */
const bridgeOf = (cfg: McpConfig, upstreams: Effect.Effect.Success<ReturnType<typeof upstreamsOf>>) =>
  Effect.gen(function* () {
    const creds = cfg.bridge
    if (creds === undefined) return
    const opts = natsOptionsFromUrl(serverUrl(), creds)
    const nc = yield* Effect.acquireRelease(
      Effect.tryPromise({ try: () => connect({ ...opts, name: "wk-mcp-bridge", ...inboxOptionOf(creds.user) }), catch: (e) => connectFailure(e, opts) }),
      (c) => Effect.promise(() => c.drain().catch(() => undefined))
    )
    const bridge = new ToolBridge(upstreams.tools).serve(nc)
    yield* Effect.addFinalizer(() => Effect.sync(() => bridge.stop()))
  })

/** Serves the governing MCP server on stdio (stdout is the protocol; logs go to stderr) until the client closes it. */
const serve = (cfg: McpConfig) =>
  Effect.gen(function* () {
    const upstreams = yield* upstreamsOf(cfg)
    const client = yield* connectClient("agent", cfg.principal, cfg.key_file)
    yield* bridgeOf(cfg, upstreams)
    const server = governingServer({ client, tools: upstreams.tools, sessionId: cfg.session_id, holdWaitMs: cfg.hold_wait_ms, ...(cfg.gateway_url !== undefined ? { gatewayUrl: cfg.gateway_url } : {}) })
    yield* Effect.promise(() => server.connect(new StdioServerTransport()))
    log.info({ tools: upstreams.tools.length, servers: Object.keys(cfg.servers), principal: cfg.principal, bridge: cfg.bridge !== undefined }, "wk mcp: governing upstream tools on stdio")
    // Until the MCP client closes stdin (or the process is stopped).
    yield* Effect.async<void>((resume) => {
      const done = () => resume(Effect.void)
      process.stdin.once("end", done)
      server.onclose = done
    })
    yield* Effect.promise(() => server.close())
  }).pipe(Effect.scoped)

/** Prints the profile fragment and the bridge's nats.conf user that the upstream tools suggest. */
const printProfile = (cfg: McpConfig, witnessClass: string, password: string | undefined) =>
  Effect.gen(function* () {
    const upstreams = yield* upstreamsOf(cfg)
    const profile = profileFor("mcp-tools", cfg.principal, upstreams.tools, witnessClass)
    const user = cfg.bridge?.user.replace(/^tool-/, "") ?? "mcp"
    const entry = toolUserEntry(user, upstreams.tools.map((t) => t.name), password ?? cfg.bridge?.pass ?? randomBytes(24).toString("base64url"))
    yield* Console.log(JSON.stringify({ profile, nats_conf_user: entry, tools: upstreams.tools.map((t) => ({ name: t.name, server: t.server, upstream: t.upstreamName, hints: t.hints })) }, null, 2))
  }).pipe(Effect.scoped)

/** `wk mcp --config FILE [--profile]`. */
export const mcpCommand = Command.make(
  "mcp",
  {
    config: configOption,
    profile: Options.boolean("profile").pipe(Options.withDescription("print the profile fragment (grants; a witness for every tool not declared read-only) and the bridge's nats.conf user, then exit")),
    witnessClass: Options.text("witness-class").pipe(Options.withDefault("human"), Options.withDescription("with --profile: the class of witness a non-read-only tool needs (default human)")),
    password: Options.text("password").pipe(Options.optional, Options.withDescription("with --profile: the bridge user's password (default: the config's, else random)"))
  },
  ({ config, profile, witnessClass, password }) => Effect.flatMap(configAt(config), (cfg) => (profile ? printProfile(cfg, witnessClass, Option.getOrUndefined(password)) : serve(cfg)))
).pipe(Command.withDescription("Govern upstream MCP servers: an MCP server on stdio whose every tools/call is a signed proposal to the kernel"))
