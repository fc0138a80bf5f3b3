#!/usr/bin/env node
// `wk`: the operator, agent and witness command line. This module is the dispatcher: it answers
// `wk --help` and usage errors itself, takes `--server` and `--context` out of the arguments for
// every command, and loads a command's module (and Run.ts, which runs it under @effect/cli) only
// when that command runs. Help is plain text from Help.ts; every failure ends as one line on
// stderr with an exit code from Exit.ts.
import type { Command } from "@effect/cli"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { globalSelection } from "./ContextSelection.js"
import { ExitCode } from "./Exit.js"
import { childrenOf, descriptorOf, globalOptions, helpText, summaryOf, table } from "./Help.js"
import { repoRoot } from "./Paths.js"
import type { runCommand } from "./Run.js"

type AnyCommand = Command.Command<string, never, unknown, unknown>

/** `wk mcp init`: set up governed MCP in one step. */
const mcpInit = { name: "mcp", summary: "set up governed MCP in one step: client config, bridge config, key and NATS user, suggested profile", module: "McpInitCommand", export: "mcpInitCommand" }
/** `wk mcp serve --http`: the governed MCP endpoint for a team over streamable HTTP with OAuth 2.1. */
const mcpServe = { name: "mcp", summary: "serve governed MCP tools to a team over streamable HTTP with OAuth 2.1 bearer tokens", module: "McpServeCommand", export: "mcpServeCommand" }

/** Every top-level command: its name, one line for `wk --help`, and the module and export that define it. */
const registry: ReadonlyArray<{ name: string; summary: string; module: string; export: string }> = [
  { name: "start", summary: "run NATS (embedded unless NATS_URL is set), the kernel and the demo bank", module: "KernelCommands", export: "startCommand" },
  { name: "kernel", summary: "run one kernel process against the NATS server in NATS_URL", module: "KernelCommands", export: "kernelCommand" },
  { name: "propose", summary: "propose a tool call as an agent; the exit code is its outcome", module: "ProposeCommand", export: "proposeCommand" },
  { name: "held", summary: "read held calls: ls, show, watch", module: "HeldCommands", export: "heldCommand" },
  { name: "attest", summary: "show a held call, confirm, and sign an attestation bound to it", module: "WitnessCommands", export: "attestCommand" },
  { name: "cancel", summary: "cancel a held call (its proposer or a policy admin)", module: "WitnessCommands", export: "cancelCommand" },
  { name: "standing", summary: "standing approvals: grant one (bounded, signed), revoke it, list them with their uses", module: "StandingCommands", export: "standingCommand" },
  { name: "settle", summary: "settle a call whose outcome is unknown: the effect happened or not (signed)", module: "WitnessCommands", export: "settleCommand" },
  { name: "result", summary: "print a held call's delivered result (--wait until there is one)", module: "WitnessCommands", export: "resultCommand" },
  { name: "ack", summary: "acknowledge a delivered result so it is not delivered again", module: "WitnessCommands", export: "ackCommand" },
  { name: "events", summary: "follow the event log live, every call's events (tail), filterable", module: "EventsCommand", export: "eventsCommand" },
  { name: "status", summary: "streams, consumer lag, open calls by state, policy epoch, plugins, kernels", module: "StatusCommand", export: "statusCommand" },
  { name: "audit", summary: "replay the event log and check every decision; export and verify a call", module: "AuditCommands", export: "auditCommand" },
  { name: "profile", summary: "show the merged policy for a call and which layer set each part", module: "ProfileCommands", export: "profileCommand" },
  { name: "policy", summary: "decide a call offline as the kernel would (eval), run policy tests (test), apply a profile", module: "PolicyCommands", export: "policyCommand" },
  { name: "plugin", summary: "build, sign, verify, inspect and pin WASM policy plugins", module: "PluginCommands", export: "pluginCommand" },
  { name: "keygen", summary: "write a new ed25519 signing key file", module: "PluginCommands", export: "keygenCommand" },
  { name: "dev-key", summary: "write or print a principal's development key (example profiles only)", module: "DevKeyCommand", export: "devKeyCommand" },
  { name: "context", summary: "save and choose connections: add, use, ls, rm", module: "ContextCommands", export: "contextCommand" },
  { name: "gateway", summary: "serve the HTTP gateway and the web approval inbox", module: "GatewayCommand", export: "gatewayCommand" },
  { name: "provision", summary: "create the streams and buckets and apply retention limits (as the provisioner user)", module: "ProvisionCommand", export: "provisionCommand" },
  { name: "route", summary: "run witness routes: deliver witness requests by signed webhook, chat or email, with retries", module: "RouteCommand", export: "routeCommand" },
  { name: "verifier", summary: "run a verifier: check held calls' evidence terms (git ancestry, SQL read-back) and attest what it read", module: "VerifierCommand", export: "verifierCommand" },
  { name: "mcp", summary: "govern upstream MCP servers: an MCP server whose tool calls go through the kernel", module: "McpCommand", export: "mcpCommand" },
  { name: "mcp-bridge", summary: "the tool bridge of wk mcp, as its own process: serve upstream MCP tools to the kernel, signing every answer", module: "McpCommand", export: "mcpBridgeCommand" },
  { name: "demo", summary: "the demo bank of wk start: reset puts every balance back", module: "DemoCommands", export: "demoCommand" },
  { name: "nats", summary: "nats.conf helpers: the users entry of a tool service (tool-user)", module: "NatsUsers", export: "natsCommand" }
]

/** What a command needs at run time: the modules that define it, and the runner of Run.ts. */
interface Loaded {
  readonly modules: ReadonlyArray<Record<string, unknown>>
  readonly runCommand: typeof runCommand
}

/**
 * The bundled CLI's loader, when runtime/cli/wk.mjs runs the bundle (build/cli/): it runs the one
 * bundle that holds every named module and Run.ts, so a command and its runner share one copy of
 * effect. Without it (the TypeScript sources under tsx, or the compiled build/runtime/), modules
 * are imported one by one.
 */
const bundleLoader = (globalThis as { [k: symbol]: ((modules: ReadonlyArray<string>) => Promise<Loaded>) | undefined })[Symbol.for("witness-kernel.cli.load")]

const load = async (modules: ReadonlyArray<string>): Promise<Loaded> => {
  if (bundleLoader !== undefined) return bundleLoader(modules)
  const importSibling = (module: string) => {
    // A computed specifier: resolved beside this module at run time (bundlers leave it alone).
    const specifier = `./${module}.js`
    return import(specifier) as Promise<Record<string, unknown>>
  }
  const [run, ...loaded] = await Promise.all([importSibling("Run"), ...modules.map(importSibling)])
  return { modules: loaded, runCommand: run!["runCommand"] as typeof runCommand }
}

const version = (): string => (JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { version: string }).version

const rootHelp = () =>
  [
    "Usage: wk <command> [options]",
    "",
    "Witness Kernel: governed tool calls for AI agents. Exit codes: 0 ok or completed, 1 failed, 2 usage,",
    "3 held, 4 denied, 5 refused, 6 unauthenticated, 7 unreachable, 8 tool failed (docs/cli.md).",
    "",
    "Commands:",
    ...table(registry.map((c) => ({ label: c.name, description: c.summary }))),
    "",
    "Global options:",
    ...table([...globalOptions, { label: "--version", description: "print the version" }, { label: "--completions SHELL", description: "print a completion script for sh, bash, fish or zsh" }]),
    "",
    "Run `wk <command> --help` for a command's options."
  ].join("\n")

/** Takes `--server URL` and `--context NAME` (or `--x=value`) out of the arguments. */
const takeGlobals = (args: ReadonlyArray<string>): Array<string> => {
  const rest: Array<string> = []
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!
    const m = /^--(server|context)(?:=(.*))?$/.exec(a)
    if (m === null) {
      rest.push(a)
      continue
    }
    const value = m[2] ?? args[++i]
    if (value === undefined || value === "") usage(`--${m[1]} needs a value`)
    globalSelection[m[1] as "server" | "context"] = value
  }
  return rest
}

function usage(message: string): never {
  process.stderr.write(`wk: ${message}\n`)
  process.exit(ExitCode.usage)
}

const main = async () => {
  const args = takeGlobals(process.argv.slice(2))
  const first = args[0]
  if (first === undefined || first === "-h" || first === "--help" || first === "help") return console.log(rootHelp())
  if (first === "--version" || first === "-V") return console.log(version())
  const completions = first === "--completions"
  // `wk mcp init` and `wk mcp serve` are command trees of their own (McpInitCommand.ts, McpServeCommand.ts): `wk mcp` itself takes options, not subcommands.
  const entry = first === "mcp" && args[1] === "init" ? mcpInit : first === "mcp" && args[1] === "serve" ? mcpServe : registry.find((c) => c.name === first)
  if (entry === undefined && !completions) usage(`unknown command '${first}' (see \`wk --help\`)`)
  const entries = completions ? registry : [entry!]
  const loaded = await load([...new Set(entries.map((e) => e.module))])
  const commands = entries.map((e) => {
    const command = loaded.modules.find((m) => e.export in m)?.[e.export]
    if (command === undefined) throw new Error(`wk: ${e.module} has no export ${e.export}`)
    return command as AnyCommand
  })

  // The command's path as far as the arguments name subcommands: for help and for usage errors.
  let d = descriptorOf(commands[0]!)
  let path = `wk ${summaryOf(d).name}`
  for (const a of args.slice(1)) {
    const child = childrenOf(d).find((c) => summaryOf(c).name === a)
    if (child === undefined) break
    d = child
    path = `${path} ${a}`
  }
  if (!completions && (args.includes("-h") || args.includes("--help"))) return console.log(helpText(d, path))
  if (!completions && childrenOf(d).length > 0) {
    const extra = args.slice(path.split(" ").length - 1).find((a) => !a.startsWith("-"))
    if (extra !== undefined) usage(`unknown command '${path} ${extra}' (see \`${path} --help\`)`)
    return console.log(helpText(d, path))
  }
  loaded.runCommand(commands, args, path, version())
}

void main()
