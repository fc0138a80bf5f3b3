import { Command } from "@effect/cli"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Effect, Option } from "effect"
import { ExitCode } from "./Exit.js"
import { plain } from "./Help.js"

type AnyCommand = Command.Command<string, never, unknown, unknown>

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

/**
 * Runs `wk <args>` with `commands` as its subcommands under @effect/cli, on Node. Every failure
 * ends as one line on stderr (`wk: ...`) and the exit code it carries; `helpPath` is the command's
 * path as far as the arguments name it, for usage errors.
 */
export const runCommand = (commands: ReadonlyArray<AnyCommand>, args: ReadonlyArray<string>, helpPath: string, version: string): void => {
  const wk = Command.make("wk").pipe(Command.withSubcommands(commands as [AnyCommand, ...Array<AnyCommand>]))
  const run = Command.run(wk, { name: "wk", version })
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
        const squashed = Cause.squash(cause)
        const { message, exit } = Option.isSome(failure)
          ? messageOf(failure.value, helpPath)
          : { message: `internal error: ${squashed instanceof Error ? squashed.message : String(squashed)}${process.env["WK_DEBUG"] ? `\n${Cause.pretty(cause)}` : " (WK_DEBUG=1 prints the stack)"}`, exit: ExitCode.failed }
        process.stderr.write(`wk: ${message}\n`)
        process.exitCode = exit
      })
    ),
    Effect.provide(NodeContext.layer),
    NodeRuntime.runMain({ disableErrorReporting: true })
  )
}
