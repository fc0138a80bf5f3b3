import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { homedir } from "node:os"
import { join } from "node:path"
import { Schema } from "effect"
import { globalSelection } from "./ContextSelection.js"

/**
 * A saved connection, like `nats context`: the NATS server, the user and password to connect
 * as, and the key file to sign with. Every field is optional: what a context leaves out, the
 * command's own defaults fill in.
 */
export const WkContext = Schema.Struct({
  name: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_.-]{1,64}$/, { message: () => "a context name is 1-64 letters, digits, '.', '_' or '-'" })),
  server: Schema.optional(Schema.String),
  user: Schema.optional(Schema.String),
  password: Schema.optional(Schema.String),
  key: Schema.optional(Schema.String),
  description: Schema.optional(Schema.String)
})
export type WkContext = typeof WkContext.Type

/** Where contexts live: WK_CONFIG_DIR, else $XDG_CONFIG_HOME/wk, else ~/.config/wk. */
export const configDir = (): string => process.env["WK_CONFIG_DIR"] ?? join(process.env["XDG_CONFIG_HOME"] ?? join(homedir(), ".config"), "wk")

const contextsDir = () => join(configDir(), "contexts")
const currentFile = () => join(configDir(), "context.txt")

/** Reads one saved context, or throws a one-line error naming the file. */
export const readContext = (name: string): WkContext => {
  const file = join(contextsDir(), `${name}.json`)
  if (!existsSync(file)) throw new Error(`no context '${name}' (list them with \`wk context ls\`, add one with \`wk context add ${name} --server URL\`)`)
  try {
    return Schema.decodeUnknownSync(WkContext)(JSON.parse(readFileSync(file, "utf8")))
  } catch (e) {
    throw new Error(`context file ${file} is not a saved context (${e instanceof Error ? e.message.split("\n")[0] : String(e)}): fix or remove it`)
  }
}

/** Saves a context (mode 0600: it may hold a password). */
export const saveContext = (ctx: WkContext): string => {
  const valid = Schema.decodeUnknownSync(WkContext)(ctx)
  mkdirSync(contextsDir(), { recursive: true, mode: 0o700 })
  const file = join(contextsDir(), `${valid.name}.json`)
  writeFileSync(file, JSON.stringify(valid, null, 2) + "\n", { mode: 0o600 })
  return file
}

/** Every saved context, by name. */
export const listContexts = (): Array<WkContext> =>
  existsSync(contextsDir())
    ? readdirSync(contextsDir())
        .filter((f) => f.endsWith(".json"))
        .sort()
        .map((f) => readContext(f.slice(0, -".json".length)))
    : []

/** The name `wk context use` selected, if any. */
export const currentContextName = (): string | undefined => {
  if (!existsSync(currentFile())) return undefined
  const name = readFileSync(currentFile(), "utf8").trim()
  return name === "" ? undefined : name
}

/** Selects a saved context for every later command. */
export const useContext = (name: string): void => {
  readContext(name)
  mkdirSync(configDir(), { recursive: true, mode: 0o700 })
  writeFileSync(currentFile(), `${name}\n`)
}


/** The context in force: `--context`, else WK_CONTEXT, else the one `wk context use` selected. */
export const activeContext = (): WkContext | undefined => {
  const name = globalSelection.context ?? process.env["WK_CONTEXT"] ?? currentContextName()
  return name === undefined || name === "" ? undefined : readContext(name)
}
