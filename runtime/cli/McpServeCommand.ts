import { Command, Options } from "@effect/cli"
import { connect } from "@nats-io/transport-node"
import { Console, Effect, Either } from "effect"
import { statSync } from "node:fs"
import { WitnessClient } from "../client/Client.js"
import { inboxOptionOf } from "../schema/Subjects.js"
import { log } from "../observability/Log.js"
import { loadHttpEndpointConfig, readBindings, sessionOf, type HttpEndpointConfig } from "../integrations/mcp/HttpEndpointConfig.js"
import { startHttpEndpoint, type HeldPrincipal } from "../integrations/mcp/HttpEndpoint.js"
import { TokenVerifier } from "../integrations/mcp/TokenVerifier.js"
import { CliError, connectFailure, natsOptionsFor, secretKeyOf } from "./Connect.js"
import { ExitCode } from "./Exit.js"
import { listedTools } from "./McpCommand.js"

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
const serveCommand = Command.make(
  "serve",
  {
    http: Options.boolean("http").pipe(Options.withDescription("serve MCP over streamable HTTP with OAuth 2.1 bearer tokens (the only transport of serve; stdio is wk mcp)")),
    config: Options.file("config", { exists: "yes" }).pipe(Options.withDescription("the endpoint's config (JSON: listen, resource, issuers, principals, profiles, catalog or servers; docs/mcp.md)"))
  },
  ({ http, config }) =>
    http ? Effect.flatMap(httpConfigAt(config), serveHttp) : Effect.fail(new CliError({ message: "wk mcp serve: give --http (MCP over stdio is wk mcp --config FILE)", exit: ExitCode.usage }))
).pipe(Command.withDescription("Serve the governed MCP tools to a team over streamable HTTP: OAuth 2.1 bearer tokens, each agent its own principal"))

/** `wk mcp serve --http --config FILE`: a command tree of its own, as `wk mcp` itself takes options. */
export const mcpServeCommand = Command.make("mcp").pipe(Command.withSubcommands([serveCommand]))
