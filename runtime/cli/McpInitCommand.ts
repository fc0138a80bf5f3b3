import { Command, Options } from "@effect/cli"
import { Console, Effect, Either } from "effect"
import { randomBytes } from "node:crypto"
import { chmodSync, existsSync, mkdirSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { decodeBridgeConfig, decodeMcpConfig, type Upstream } from "../integrations/mcp/McpConfig.js"
import { profileFor } from "../integrations/mcp/ProfileSnippet.js"
import { writeCatalog } from "../integrations/mcp/ToolCatalog.js"
import { connectUpstreams } from "../integrations/mcp/Upstreams.js"
import { generateKey } from "../plugins/Signing.js"
import { toolServiceClass } from "../schema/ToolReplySignature.js"
import { CliError } from "./CliError.js"
import { serverUrl } from "./Connect.js"
import { ExitCode } from "./Exit.js"
import { reloadLocalServer, writeLocalUser } from "./LocalNatsUsers.js"
import { toolUserEntry, toolUserName } from "./NatsUsers.js"
import { defaultDataDir, repoRoot } from "./Paths.js"

/** The bridge's tool service name: its NATS user is `tool-mcp`. */
const BridgeService = "mcp"

/** `NAME=URL` (streamable HTTP) or `NAME=COMMAND ARG...` (stdio; split on spaces). */
export const upstreamOf = (spec: string): [string, Upstream] | string => {
  const eq = spec.indexOf("=")
  if (eq <= 0) return `--upstream '${spec}': expected NAME=COMMAND ARGS... or NAME=URL`
  const name = spec.slice(0, eq)
  const rest = spec.slice(eq + 1).trim()
  if (rest === "") return `--upstream '${spec}': give the command or URL after '='`
  if (/^https?:\/\//.test(rest)) return [name, { url: rest }]
  const [command, ...args] = rest.split(/\s+/)
  return [name, { command: command!, ...(args.length > 0 ? { args } : {}) }]
}

const writeJson = (path: string, value: unknown, mode: number) => {
  writeFileSync(path, JSON.stringify(value, null, 2) + "\n", { mode })
  chmodSync(path, mode)
}

const usage = (message: string) => new CliError({ message, exit: ExitCode.usage })

/**
 * `wk mcp init`: sets up governed MCP in one step. It connects to the upstreams once to list their
 * tools, then writes, in `--out`:
 * - `wk-bridge.json` (0600) and `bridge.key.json` (0600): the bridge's config, with a NATS login
 *   generated here and a fresh signing key;
 * - `mcp-tools.json`: the tool catalog (no secrets), which the agent side lists tools from;
 * - `wk-mcp.json`: the agent side's config (its principal, the catalog, the inbox);
 * - `profile.json`: the suggested profile (grants and per-tool rules from the annotations, and the
 *   bridge principal registered with class `tool:<tool>` for each tool), to review and apply;
 * - `mcp-client.json`: the `mcpServers` entry for an MCP client.
 * The bridge's NATS user goes to this store's local users (LocalNatsUsers.ts) with the same
 * generated password, and a running `wk start` reloads its server: no nats.conf edit, no restart,
 * no password to copy.
 */
export const mcpInitCommand = Command.make("mcp").pipe(
  Command.withSubcommands([
    Command.make(
      "init",
      {
        upstream: Options.text("upstream").pipe(Options.repeated, Options.withDescription("an upstream MCP server: NAME=COMMAND ARGS... (stdio) or NAME=URL (streamable HTTP); repeat for each")),
        principal: Options.text("principal").pipe(Options.withDefault("agent:alice"), Options.withDescription("the agent every tool call is signed as (default agent:alice)")),
        bridgePrincipal: Options.text("bridge-principal").pipe(Options.withDefault("svc:mcp-bridge"), Options.withDescription("the bridge's service principal (default svc:mcp-bridge)")),
        witnessClass: Options.text("witness-class").pipe(Options.withDefault("human"), Options.withDescription("the class of witness a tool not declared read-only needs (default human)")),
        gatewayUrl: Options.text("gateway-url").pipe(Options.withDefault("http://127.0.0.1:8787"), Options.withDescription("the HTTP gateway, for the inbox link of a held call")),
        out: Options.text("out").pipe(Options.withDefault("wk-mcp"), Options.withDescription("folder to write the configs, key, catalog and profile in (default ./wk-mcp)")),
        force: Options.boolean("force").pipe(Options.withDescription("replace files an earlier init wrote"))
      },
      (a) =>
        Effect.gen(function* () {
          if (a.upstream.length === 0) return yield* Effect.fail(usage("name at least one upstream: --upstream fs='npx -y @modelcontextprotocol/server-filesystem /srv/shared'"))
          const servers: Record<string, Upstream> = {}
          for (const spec of a.upstream) {
            const u = upstreamOf(spec)
            if (typeof u === "string") return yield* Effect.fail(usage(u))
            servers[u[0]] = u[1]
          }
          const out = resolve(a.out)
          const files = { bridge: join(out, "wk-bridge.json"), key: join(out, "bridge.key.json"), catalog: join(out, "mcp-tools.json"), agent: join(out, "wk-mcp.json"), profile: join(out, "profile.json"), client: join(out, "mcp-client.json") }
          const taken = Object.values(files).filter((f) => existsSync(f))
          if (taken.length > 0 && !a.force) return yield* Effect.fail(usage(`${taken[0]} exists: pass --force to replace what an earlier init wrote, or --out DIR`))
          const password = randomBytes(24).toString("base64url")
          const bridgeConfig = { principal: a.bridgePrincipal, key_file: files.key, nats: { user: toolUserName(BridgeService), pass: password }, catalog: files.catalog, servers }
          const agentConfig = { principal: a.principal, session_id: "mcp", hold_wait_ms: 10_000, gateway_url: a.gatewayUrl, catalog: files.catalog }
          // Both configs as wk mcp and wk mcp-bridge will read them: a field that is wrong fails here, naming it.
          const checked = Either.all([decodeBridgeConfig(JSON.stringify(bridgeConfig), "--upstream"), decodeMcpConfig(JSON.stringify(agentConfig), "--principal")])
          if (Either.isLeft(checked)) return yield* Effect.fail(usage(checked.left))

          const upstreams = yield* Effect.tryPromise({
            try: () => connectUpstreams(servers),
            catch: (e) => new CliError({ message: `cannot list the upstreams' tools: ${e instanceof Error ? e.message : String(e)}`, exit: ExitCode.unreachable })
          })
          const tools = upstreams.tools
          yield* Effect.promise(() => upstreams.close())
          if (tools.length === 0) return yield* Effect.fail(new CliError({ message: "the upstreams list no tools: nothing to govern", exit: ExitCode.failed }))
          const names = tools.map((t) => t.name)
          const entry = yield* Effect.try({ try: () => toolUserEntry(BridgeService, names, password), catch: (e) => usage(e instanceof Error ? e.message : String(e)) })

          const key = generateKey()
          const suggested = profileFor("mcp-tools", a.principal, tools, a.witnessClass)
          const profile = { ...suggested, principals: { [a.bridgePrincipal]: { keys: [key.public_key], classes: names.map(toolServiceClass) } } }
          const client = { mcpServers: { wk: { command: process.execPath, args: [join(repoRoot, "runtime", "cli", "wk.mjs"), "mcp", "--config", files.agent], env: { NATS_URL: serverUrl() } } } }
          const local = yield* Effect.try({
            try: () => {
              mkdirSync(out, { recursive: true })
              writeJson(files.key, key, 0o600)
              writeJson(files.bridge, bridgeConfig, 0o600)
              writeCatalog(files.catalog, tools)
              writeJson(files.agent, agentConfig, 0o644)
              writeJson(files.profile, profile, 0o644)
              writeJson(files.client, client, 0o644)
              return writeLocalUser(defaultDataDir, toolUserName(BridgeService), entry)
            },
            catch: (e) => new CliError({ message: `cannot write the MCP setup in ${out}: ${e instanceof Error ? e.message : String(e)}`, exit: ExitCode.failed })
          })
          const reloaded = yield* Effect.try({ try: () => reloadLocalServer(defaultDataDir), catch: (e) => new CliError({ message: `wrote ${local}, but the running nats-server did not reload: ${e instanceof Error ? e.message : String(e)}; restart wk start` }) })
          yield* Console.log(
            [
              `Governed MCP for ${a.principal}: ${names.length} tools (${names.join(", ")})`,
              `  ${files.client}   the MCP client's mcpServers entry (wk mcp --config ${files.agent})`,
              `  ${files.agent}   the agent side: lists tools from the catalog`,
              `  ${files.bridge}   the bridge (0600): its NATS user ${toolUserName(BridgeService)}, password generated, key ${files.key}`,
              `  ${files.profile}   the suggested profile: review, then apply (wk policy apply ${files.profile} --principal ADMIN)`,
              `  ${local}   the bridge's NATS user for this store's server: ${reloaded !== undefined ? `nats-server (pid ${reloaded}) reloaded` : "read by the next wk start"}`,
              "",
              `Next: wk mcp-bridge --config ${files.bridge}   (as another OS user in production: docs/mcp.md)`
            ].join("\n")
          )
        })
    ).pipe(Command.withDescription("Set up governed MCP in one step: the MCP client's config, the bridge's config, key and NATS user, and the suggested profile"))
  ]),
  Command.withDescription("Set up governed MCP (init)")
)

