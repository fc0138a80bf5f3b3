import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { rmSync } from "node:fs"
import { join } from "node:path"
import { CliError } from "./CliError.js"
import { globalSelection } from "./ContextSelection.js"
import { configDir, currentContextName, listContexts, readContext, saveContext, useContext, type WkContext } from "./Context.js"
import { ExitCode } from "./Exit.js"

const nameArg = Args.text({ name: "name" }).pipe(Args.withDescription("the context's name (letters, digits, '.', '_', '-')"))
const json = Options.boolean("json").pipe(Options.withDescription("print JSON instead of text"))

const attempt = <A>(f: () => A) => Effect.try({ try: f, catch: (e) => new CliError({ message: e instanceof Error ? e.message.split("\n")[0]! : String(e), exit: ExitCode.usage }) })

/** Passwords are never printed back. */
const redacted = (c: WkContext) => ({ ...c, ...(c.password !== undefined ? { password: "***" } : {}) })

const addCommand = Command.make(
  "add",
  {
    name: nameArg,
    url: Options.text("url").pipe(Options.optional, Options.withDescription("NATS server URL to save, for example nats://127.0.0.1:4322 (--server works too)")),
    user: Options.text("user").pipe(Options.optional, Options.withDescription("NATS user to connect as (default: each command's role from nats.conf)")),
    password: Options.text("password").pipe(Options.optional, Options.withDescription("that user's NATS password (saved in a 0600 file)")),
    key: Options.text("key").pipe(Options.optional, Options.withDescription("key file to sign with (from `wk keygen` or `wk dev-key --out`)")),
    description: Options.text("description").pipe(Options.optional, Options.withDescription("a note shown by `wk context ls`")),
    use: Options.boolean("use").pipe(Options.withDescription("also select it for later commands"))
  },
  (o) =>
    Effect.gen(function* () {
      // `--server` is a global option (main.ts takes it out); a context saves it when given here.
      const server = Option.getOrUndefined(o.url) ?? globalSelection.server
      const ctx: WkContext = {
        name: o.name,
        ...(server !== undefined ? { server } : {}),
        ...Option.match(o.user, { onNone: () => ({}), onSome: (user) => ({ user }) }),
        ...Option.match(o.password, { onNone: () => ({}), onSome: (password) => ({ password }) }),
        ...Option.match(o.key, { onNone: () => ({}), onSome: (key) => ({ key }) }),
        ...Option.match(o.description, { onNone: () => ({}), onSome: (description) => ({ description }) })
      }
      const file = yield* attempt(() => saveContext(ctx))
      if (o.use) yield* attempt(() => useContext(o.name))
      yield* Console.log(`saved context '${o.name}' in ${file}${o.use ? " and selected it" : ` (select it with \`wk context use ${o.name}\`)`}`)
    })
).pipe(Command.withDescription("Save a connection (server, user, password, key) under a name"))

const useCommand = Command.make("use", { name: nameArg }, ({ name }) =>
  Effect.gen(function* () {
    yield* attempt(() => useContext(name))
    yield* Console.log(`using context '${name}'`)
  })
).pipe(Command.withDescription("Select a saved context for every later command (--context NAME overrides it once)"))

const lsCommand = Command.make("ls", { json }, ({ json }) =>
  Effect.gen(function* () {
    const all = yield* attempt(listContexts)
    const current = currentContextName()
    if (json) return yield* Console.log(JSON.stringify({ current: current ?? null, contexts: all.map(redacted) }, null, 2))
    if (all.length === 0) return yield* Console.log(`no contexts in ${configDir()} (add one with \`wk context add NAME --server URL\`)`)
    for (const c of all)
      yield* Console.log(`${c.name === current ? "*" : " "} ${c.name.padEnd(16)} ${(c.server ?? "(default server)").padEnd(32)} ${c.user ?? "(role users)"}${c.key ? `  key ${c.key}` : ""}${c.description ? `  ${c.description}` : ""}`)
  })
).pipe(Command.withDescription("List saved contexts; * marks the selected one"))

const showCommand = Command.make("show", { name: nameArg, json }, ({ name, json }) =>
  Effect.gen(function* () {
    const c = redacted(yield* attempt(() => readContext(name)))
    yield* Console.log(json ? JSON.stringify(c, null, 2) : Object.entries(c).map(([k, v]) => `${k.padEnd(12)} ${String(v)}`).join("\n"))
  })
).pipe(Command.withDescription("Show one saved context (the password is not printed)"))

const rmCommand = Command.make("rm", { name: nameArg }, ({ name }) =>
  Effect.gen(function* () {
    yield* attempt(() => readContext(name))
    rmSync(join(configDir(), "contexts", `${name}.json`))
    if (currentContextName() === name) rmSync(join(configDir(), "context.txt"))
    yield* Console.log(`removed context '${name}'`)
  })
).pipe(Command.withDescription("Remove a saved context"))

/** `wk context`: saved connections, like `nats context`. */
export const contextCommand = Command.make("context").pipe(
  Command.withDescription("Save and choose connections (server, user, password, key), like `nats context`"),
  Command.withSubcommands([addCommand, useCommand, lsCommand, showCommand, rmCommand])
)

