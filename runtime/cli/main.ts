#!/usr/bin/env node
// `wk`: the operator, agent and witness command line. Each command's module is loaded only when
// that command runs (the kernel, the gateway and the plugin host are large), `--server` and
// `--context` are taken out of the arguments here for every command, help is plain text from
// Help.ts, and every failure ends as one line on stderr with an exit code from Exit.ts.
import type { Command } from "@effect/cli"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { globalSelection } from "./ContextSelection.js"
import { ExitCode } from "./Exit.js"
import { childrenOf, descriptorOf, globalOptions, helpText, plain, summaryOf, table } from "./Help.js"
import { repoRoot } from "./Paths.js"

type AnyCommand = Command.Command<string, never, unknown, unknown>

/** Every top-level command: its name, one line for `wk --help`, and how to load it. */
const registry: ReadonlyArray<{ name: string; summary: string; load: () => Promise<AnyCommand> }> = [
  { name: "start", summary: "run NATS (embedded unless NATS_URL is set), the kernel and the demo bank", load: async () => (await import("./KernelCommands.js")).startCommand as AnyCommand },
  { name: "kernel", summary: "run one kernel process against the NATS server in NATS_URL", load: async () => (await import("./KernelCommands.js")).kernelCommand as AnyCommand },
  { name: "propose", summary: "propose a tool call as an agent; the exit code is its outcome", load: async () => (await import("./ProposeCommand.js")).proposeCommand as AnyCommand },
  { name: "held", summary: "read held calls: ls, show, watch", load: async () => (await import("./HeldCommands.js")).heldCommand as AnyCommand },
  { name: "attest", summary: "show a held call, confirm, and sign an attestation bound to it", load: async () => (await import("./WitnessCommands.js")).attestCommand as AnyCommand },
  { name: "cancel", summary: "cancel a held call (its proposer or a policy admin)", load: async () => (await import("./WitnessCommands.js")).cancelCommand as AnyCommand },
  { name: "standing", summary: "standing approvals: grant one (bounded, signed), revoke it, list them with their uses", load: async () => (await import("./StandingCommands.js")).standingCommand as AnyCommand },
  { name: "settle", summary: "settle a call whose outcome is unknown: the effect happened or not (signed)", load: async () => (await import("./WitnessCommands.js")).settleCommand as AnyCommand },
  { name: "result", summary: "print a held call's delivered result (--wait until there is one)", load: async () => (await import("./WitnessCommands.js")).resultCommand as AnyCommand },
  { name: "ack", summary: "acknowledge a delivered result so it is not delivered again", load: async () => (await import("./WitnessCommands.js")).ackCommand as AnyCommand },
  { name: "events", summary: "follow the event log live, every call's events (tail), filterable", load: async () => (await import("./EventsCommand.js")).eventsCommand as AnyCommand },
  { name: "status", summary: "streams, consumer lag, open calls by state, policy epoch, plugins, kernels", load: async () => (await import("./StatusCommand.js")).statusCommand as AnyCommand },
  { name: "audit", summary: "replay the event log and check every decision; export and verify a call", load: async () => (await import("./AuditCommands.js")).auditCommand as AnyCommand },
  { name: "profile", summary: "show the merged policy for a call and which layer set each part", load: async () => (await import("./ProfileCommands.js")).profileCommand as AnyCommand },
  { name: "policy", summary: "decide a call offline as the kernel would (eval), run policy tests (test), apply a profile", load: async () => (await import("./PolicyCommands.js")).policyCommand as AnyCommand },
  { name: "plugin", summary: "build, sign, verify, inspect and pin WASM policy plugins", load: async () => (await import("./PluginCommands.js")).pluginCommand as AnyCommand },
  { name: "keygen", summary: "write a new ed25519 signing key file", load: async () => (await import("./PluginCommands.js")).keygenCommand as AnyCommand },
  { name: "dev-key", summary: "write or print a principal's development key (example profiles only)", load: async () => (await import("./DevKeyCommand.js")).devKeyCommand as AnyCommand },
  { name: "context", summary: "save and choose connections: add, use, ls, rm", load: async () => (await import("./ContextCommands.js")).contextCommand as AnyCommand },
  { name: "gateway", summary: "serve the HTTP gateway and the web approval inbox", load: async () => (await import("./GatewayCommand.js")).gatewayCommand as AnyCommand },
  { name: "provision", summary: "create the streams and buckets and apply retention limits (as the provisioner user)", load: async () => (await import("./ProvisionCommand.js")).provisionCommand as AnyCommand },
  { name: "route", summary: "run witness routes: deliver witness requests by signed webhook, chat or email, with retries", load: async () => (await import("./RouteCommand.js")).routeCommand as AnyCommand },
  { name: "verifier", summary: "run a verifier: check held calls' evidence terms (git ancestry, SQL read-back) and attest what it read", load: async () => (await import("./VerifierCommand.js")).verifierCommand as AnyCommand },
  { name: "mcp", summary: "govern upstream MCP servers: an MCP server whose tool calls go through the kernel", load: async () => (await import("./McpCommand.js")).mcpCommand as AnyCommand },
  { name: "demo", summary: "the demo bank of wk start: reset puts every balance back", load: async () => (await import("./DemoCommands.js")).demoCommand as AnyCommand },
  { name: "nats", summary: "nats.conf helpers: the users entry of a tool service (tool-user)", load: async () => (await import("./NatsUsers.js")).natsCommand as AnyCommand }
]

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

/** The message of anything a command failed with, as one line (never `[object Object]`). */
const messageOf = (e: unknown, helpPath: string): { message: string; exit: number } => {
  // @effect/cli's parse errors (ValidationError) carry their text as a HelpDoc in `error`.
  if (typeof e === "object" && e !== null && Symbol.for("@effect/cli/ValidationError") in e && "error" in e) {
    const text = plain(e.error)
    return { message: `${text === "" ? "invalid command line" : text} (see \`${helpPath} --help\`)`, exit: ExitCode.usage }
  }
  if (typeof e === "object" && e !== null) {
    const r = e as { message?: unknown; exit?: unknown; detail?: unknown; command?: unknown }
    const exit = typeof r.exit === "number" ? r.exit : ExitCode.failed
    if (typeof r.message === "string" && r.message !== "") return { message: r.message, exit }
    if (typeof r.detail === "string") return { message: `${typeof r.command === "string" ? `${r.command}: ` : ""}${r.detail}`, exit }
    return { message: JSON.stringify(e), exit }
  }
  return { message: String(e), exit: ExitCode.failed }
}

const main = async () => {
  const args = takeGlobals(process.argv.slice(2))
  const first = args[0]
  if (first === undefined || first === "-h" || first === "--help" || first === "help") return console.log(rootHelp())
  if (first === "--version" || first === "-V") return console.log(version())
  const completions = first === "--completions"
  const entry = registry.find((c) => c.name === first)
  if (entry === undefined && !completions) usage(`unknown command '${first}' (see \`wk --help\`)`)
  const commands = completions ? await Promise.all(registry.map((c) => c.load())) : [await entry!.load()]

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

  const { Command } = await import("@effect/cli")
  const { NodeContext, NodeRuntime } = await import("@effect/platform-node")
  const { Cause, Effect, Option } = await import("effect")
  const wk = Command.make("wk").pipe(Command.withSubcommands(commands as [AnyCommand, ...Array<AnyCommand>]))
  const run = Command.run(wk, { name: "wk", version: version() })
  // @effect/cli prints its own multi-line, coloured error before failing; the one line below replaces it.
  const quiet = Effect.flatMap(Effect.console, (c) => {
    const console = Object.create(c) as typeof c
    Object.assign(console, { error: () => Effect.void })
    return Effect.withConsole(run(["node", "wk", ...args]), console)
  })
  quiet.pipe(
    Effect.catchAllCause((cause) =>
      Effect.sync(() => {
        const failure = Cause.failureOption(cause)
        if (Option.isNone(failure) && Cause.isInterruptedOnly(cause)) return
        const { message, exit } = Option.isSome(failure)
          ? messageOf(failure.value, path)
          : { message: `internal error: ${Cause.squash(cause) instanceof Error ? (Cause.squash(cause) as Error).message : String(Cause.squash(cause))}${process.env["WK_DEBUG"] ? `\n${Cause.pretty(cause)}` : " (WK_DEBUG=1 prints the stack)"}`, exit: ExitCode.failed }
        process.stderr.write(`wk: ${message}\n`)
        process.exitCode = exit
      })
    ),
    Effect.provide(NodeContext.layer),
    NodeRuntime.runMain({ disableErrorReporting: true })
  )
}

void main()
