import { Command, Options } from "@effect/cli"
import { connect } from "@nats-io/transport-node"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { Console, Effect, Either, Option } from "effect"
import { randomBytes } from "node:crypto"
import { natsOptionsFromUrl } from "../ledger/Nats.js"
import { inboxOptionOf } from "../schema/Subjects.js"
import { log } from "../observability/Log.js"
import nacl from "tweetnacl"
import { loadBridgeConfig, loadMcpConfig, type BridgeConfig, type McpConfig } from "../integrations/mcp/McpConfig.js"
import { toolServiceClass } from "../schema/ToolReplySignature.js"
import { connectUpstreams } from "../integrations/mcp/Upstreams.js"
import { readCatalog, writeCatalog, type ListedTool } from "../integrations/mcp/ToolCatalog.js"
import { ToolBridge } from "../integrations/mcp/ToolBridge.js"
import { governingServer } from "../integrations/mcp/GoverningServer.js"
import { profileFor } from "../integrations/mcp/ProfileSnippet.js"
import { CliError, connectClient, connectFailure, secretKeyOf, serverUrl } from "./Connect.js"
import { ExitCode } from "./Exit.js"
import { toolUserEntry } from "./NatsUsers.js"

const configOption = Options.file("config", { exists: "yes" }).pipe(Options.withDescription("the wk mcp config file (JSON: principal, servers, bridge, ...; docs/mcp.md)"))

const configAt = (path: string) =>
  Either.match(loadMcpConfig(path), { onLeft: (message) => Effect.fail(new CliError({ message, exit: ExitCode.usage })), onRight: (c) => Effect.succeed(c) })

const upstreamsOf = (servers: BridgeConfig["servers"]) =>
  Effect.acquireRelease(
    Effect.tryPromise({ try: () => connectUpstreams(servers), catch: (e) => new CliError({ message: e instanceof Error ? e.message : String(e), exit: ExitCode.unreachable }) }),
    (u) => Effect.promise(() => u.close())
  )

/**
 * The tool bridge (`wk mcp-bridge`): its own process, on its own NATS user, signing every answer
 * with its service key, until stopped.
 */
const runBridge = (cfg: BridgeConfig) =>
  Effect.gen(function* () {
    const upstreams = yield* upstreamsOf(cfg.servers)
    const secretKey = yield* secretKeyOf(cfg.principal, cfg.key_file)
    const opts = natsOptionsFromUrl(serverUrl(), cfg.nats)
    const nc = yield* Effect.acquireRelease(
      Effect.tryPromise({ try: () => connect({ ...opts, name: "wk-mcp-bridge", ...inboxOptionOf(cfg.nats.user) }), catch: (e) => connectFailure(e, opts) }),
      (c) => Effect.promise(() => c.drain().catch(() => undefined))
    )
    if (cfg.catalog !== undefined) {
      const path = cfg.catalog
      yield* Effect.try({ try: () => writeCatalog(path, upstreams.tools), catch: (e) => new CliError({ message: `cannot write the tool catalog ${path}: ${e instanceof Error ? e.message : String(e)}`, exit: ExitCode.usage }) })
    }
    const bridge = new ToolBridge(upstreams.tools, { principal: cfg.principal, secretKey }).serve(nc)
    yield* Effect.addFinalizer(() => Effect.sync(() => bridge.stop()))
    yield* Console.log(`Tool bridge ${cfg.principal} serving ${upstreams.tools.map((t) => t.name).join(", ")} as NATS user ${cfg.nats.user} (Ctrl-C stops)`)
    return yield* Effect.never
  }).pipe(Effect.scoped)

/** Prints what the bridge's deployment needs: its principal's registration (a class per tool) and its nats.conf user. */
const printBridgeProfile = (cfg: BridgeConfig) =>
  Effect.gen(function* () {
    const upstreams = yield* upstreamsOf(cfg.servers)
    const secretKey = yield* secretKeyOf(cfg.principal, cfg.key_file)
    const key = Buffer.from(nacl.sign.keyPair.fromSecretKey(secretKey).publicKey).toString("base64")
    const names = upstreams.tools.map((t) => t.name)
    const entry = toolUserEntry(cfg.nats.user.replace(/^tool-/, ""), names, cfg.nats.pass)
    yield* Console.log(JSON.stringify({ principals: { [cfg.principal]: { keys: [key], classes: names.map(toolServiceClass) } }, nats_conf_user: entry }, null, 2))
  }).pipe(Effect.scoped)

/** The tools the agent side lists: from the bridge's catalog, else from the upstreams it connects to. */
export const listedTools = (cfg: Pick<McpConfig, "catalog" | "servers">) =>
  cfg.catalog !== undefined
    ? Either.match(readCatalog(cfg.catalog), { onLeft: (message) => Effect.fail(new CliError({ message, exit: ExitCode.usage })), onRight: (tools) => Effect.succeed(tools) })
    : Effect.map(upstreamsOf(cfg.servers ?? {}), (u): ReadonlyArray<ListedTool> => u.tools)

/** Serves the governing MCP server on stdio (stdout is the protocol; logs go to stderr) until the client closes it. */
const serve = (cfg: McpConfig) =>
  Effect.gen(function* () {
    const tools = yield* listedTools(cfg)
    const client = yield* connectClient("agent", cfg.principal, cfg.key_file)
    const server = governingServer({ client, tools, sessionId: cfg.session_id, holdWaitMs: cfg.hold_wait_ms, ...(cfg.gateway_url !== undefined ? { gatewayUrl: cfg.gateway_url } : {}) })
    yield* Effect.promise(() => server.connect(new StdioServerTransport()))
    log.info({ tools: tools.length, ...(cfg.catalog !== undefined ? { catalog: cfg.catalog } : { servers: Object.keys(cfg.servers ?? {}) }), principal: cfg.principal }, "wk mcp: governing upstream tools on stdio")
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
    const tools = yield* listedTools(cfg)
    const profile = profileFor("mcp-tools", cfg.principal, tools, witnessClass)
    const entry = toolUserEntry("mcp", tools.map((t) => t.name), password ?? randomBytes(24).toString("base64url"))
    yield* Console.log(JSON.stringify({ profile, nats_conf_user: entry, tools: tools.map((t) => ({ name: t.name, server: t.server, upstream: t.upstreamName, hints: t.hints })) }, null, 2))
  }).pipe(Effect.scoped)

const bridgeConfigAt = (path: string) =>
  Either.match(loadBridgeConfig(path), { onLeft: (message) => Effect.fail(new CliError({ message, exit: ExitCode.usage })), onRight: (c) => Effect.succeed(c) })

/** `wk mcp-bridge --config FILE [--profile]`. */
export const mcpBridgeCommand = Command.make(
  "mcp-bridge",
  {
    config: Options.file("config", { exists: "yes" }).pipe(Options.withDescription("the bridge's config (JSON: principal, key_file, nats, servers; mode 0600; docs/mcp.md)")),
    profile: Options.boolean("profile").pipe(Options.withDescription("print the bridge principal's registration (class tool:<tool> per tool) and its nats.conf user, then exit"))
  },
  ({ config, profile }) => Effect.flatMap(bridgeConfigAt(config), (cfg) => (profile ? printBridgeProfile(cfg) : runBridge(cfg)))
).pipe(Command.withDescription("Run the tool bridge of wk mcp as its own process: serve the upstream tools on the kernel's tool subjects, signing every answer"))

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
