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
import { CliError, connectClient, connectFailure, natsOptionsFor, secretKeyOf, serverUrl } from "./Connect.js"
import { statSync } from "node:fs"
import { WitnessClient } from "../client/Client.js"
import { loadHttpEndpointConfig, readBindings, sessionOf, type HttpEndpointConfig } from "../integrations/mcp/HttpEndpointConfig.js"
import { startHttpEndpoint, type HeldPrincipal } from "../integrations/mcp/HttpEndpoint.js"
import { TokenVerifier } from "../integrations/mcp/TokenVerifier.js"
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
const listedTools = (cfg: Pick<McpConfig, "catalog" | "servers">) =>
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

const httpConfigAt = (path: string) =>
  Either.match(loadHttpEndpointConfig(path), { onLeft: (message) => Effect.fail(new CliError({ message, exit: ExitCode.usage })), onRight: (c) => Effect.succeed(c) })

/** A key the endpoint signs with: refused when anyone but its owner may read it. */
const ownerOnlyKey = (principal: string, file: string) =>
  Effect.flatMap(
    Effect.try({ try: () => statSync(file).mode & 0o777, catch: (e) => new CliError({ message: `cannot read the key of ${principal}, ${file}: ${e instanceof Error ? e.message : String(e)}`, exit: ExitCode.usage }) }),
    (mode) =>
      (mode & 0o077) !== 0
        ? Effect.fail(new CliError({ message: `${file}: mode ${mode.toString(8).padStart(4, "0")} lets others read ${principal}'s signing key: chmod 600 ${file}`, exit: ExitCode.usage }))
        : secretKeyOf(principal, file)
  )

/**
 * Serves the governed MCP endpoint over streamable HTTP until stopped: one NATS connection (the
 * agent role), a client per principal whose key it holds, and the OAuth-protected endpoint
 * (runtime/integrations/mcp/HttpEndpoint.ts).
 */
const serveHttp = (cfg: HttpEndpointConfig) =>
  Effect.gen(function* () {
    const bindings = yield* Either.match(readBindings(cfg.profiles, cfg.resource), { onLeft: (message) => Effect.fail(new CliError({ message, exit: ExitCode.usage })), onRight: (b) => Effect.succeed(b) })
    const tools = yield* listedTools(cfg)
    const opts = yield* Effect.try({ try: () => natsOptionsFor("agent"), catch: (e) => new CliError({ message: e instanceof Error ? e.message : String(e), exit: ExitCode.usage }) })
    const nc = yield* Effect.acquireRelease(
      Effect.tryPromise({ try: () => connect({ ...opts, name: "wk-mcp-http", ...inboxOptionOf(opts.user) }), catch: (e) => connectFailure(e, opts) }),
      (c) => Effect.promise(() => c.drain().catch(() => undefined))
    )
    const principals = new Map<string, HeldPrincipal>()
    for (const [principal, p] of Object.entries(cfg.principals)) {
      const secretKey = yield* ownerOnlyKey(principal, p.key_file)
      principals.set(principal, { client: WitnessClient.over(nc, { principal, secretKey }), sessionId: sessionOf(principal, p.session_id) })
    }
    const resource = new URL(cfg.resource)
    const endpoint = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () =>
          startHttpEndpoint(
            {
              resource,
              authorizationServers: cfg.issuers.map((i) => i.issuer),
              verifier: new TokenVerifier(cfg.issuers.map((i) => ({ issuer: i.issuer, ...(i.jwks_uri !== undefined ? { jwksUri: i.jwks_uri } : {}) })), resource.href),
              bindings: () => bindings,
              principals,
              tools,
              holdWaitMs: cfg.hold_wait_ms,
              ...(cfg.gateway_url !== undefined ? { gatewayUrl: cfg.gateway_url } : {}),
              ...(cfg.scopes !== undefined ? { scopes: cfg.scopes } : {})
            },
            cfg.listen
          ),
        catch: (e) => new CliError({ message: `cannot listen on ${cfg.listen.host}:${cfg.listen.port}: ${e instanceof Error ? e.message : String(e)}`, exit: ExitCode.unreachable })
      }),
      (e) => Effect.promise(() => e.close())
    )
    const unbound = [...principals.keys()].filter((p) => !bindings.some((b) => b.principal === p))
    log.info({ url: endpoint.url.href, resource: resource.href, principals: [...principals.keys()], bindings: bindings.length, tools: tools.length, ...(unbound.length > 0 ? { unbound } : {}) }, "wk mcp serve: governing upstream tools over streamable HTTP")
    yield* Console.log(`Governed MCP endpoint ${resource.href} listening on ${endpoint.url.href} for ${[...principals.keys()].join(", ")} (Ctrl-C stops)`)
    return yield* Effect.never
  }).pipe(Effect.scoped)

/** `wk mcp serve --http --config FILE`. */
export const mcpServeCommand = Command.make(
  "serve",
  {
    http: Options.boolean("http").pipe(Options.withDescription("serve MCP over streamable HTTP with OAuth 2.1 bearer tokens (the only transport of serve; stdio is wk mcp)")),
    config: Options.file("config", { exists: "yes" }).pipe(Options.withDescription("the endpoint's config (JSON: listen, resource, issuers, principals, profiles, catalog or servers; docs/mcp.md)"))
  },
  ({ http, config }) =>
    http ? Effect.flatMap(httpConfigAt(config), serveHttp) : Effect.fail(new CliError({ message: "wk mcp serve: give --http (MCP over stdio is wk mcp --config FILE)", exit: ExitCode.usage }))
).pipe(Command.withDescription("Serve the governed MCP tools to a team over streamable HTTP: OAuth 2.1 bearer tokens, each agent its own principal"))

/** `wk mcp --config FILE [--profile]`. */
export const mcpCommand = Command.make(
  "mcp",
  {
    // Optional here so that `wk mcp serve` (its own --config) parses; the stdio server requires it.
    config: configOption.pipe(Options.optional),
    profile: Options.boolean("profile").pipe(Options.withDescription("print the profile fragment (grants; a witness for every tool not declared read-only) and the bridge's nats.conf user, then exit")),
    witnessClass: Options.text("witness-class").pipe(Options.withDefault("human"), Options.withDescription("with --profile: the class of witness a non-read-only tool needs (default human)")),
    password: Options.text("password").pipe(Options.optional, Options.withDescription("with --profile: the bridge user's password (default: the config's, else random)"))
  },
  ({ config, profile, witnessClass, password }) =>
    Effect.flatMap(
      Option.match(config, { onNone: () => Effect.fail(new CliError({ message: "wk mcp: give --config FILE (docs/mcp.md); for the team endpoint over HTTP: wk mcp serve --http --config FILE", exit: ExitCode.usage })), onSome: configAt }),
      (cfg) => (profile ? printProfile(cfg, witnessClass, Option.getOrUndefined(password)) : serve(cfg))
    )
).pipe(Command.withDescription("Govern upstream MCP servers: an MCP server on stdio whose every tools/call is a signed proposal to the kernel"), Command.withSubcommands([mcpServeCommand]))
