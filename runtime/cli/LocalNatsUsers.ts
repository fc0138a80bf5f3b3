import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { defaultConfig } from "./Paths.js"
import { storeOwner } from "./StoreLock.js"

/**
 * Users a command added for this store's embedded nats-server (`wk start`), one `users` entry per
 * file in `<data dir>/nats-users/<name>.conf` (mode 0600: they hold passwords). `wk start` serves
 * nats.conf with these entries added, so a command that sets up a service (`wk mcp init`) gives it
 * a login without anyone editing nats.conf, and the password is written once, generated, into the
 * user entry and the service's own config: nothing has to be made equal by hand.
 */
export const localUsersDir = (dataDir: string): string => join(dataDir, "nats-users")

/** The marker in nats.conf after which the local users are added. */
const Marker = "users: ["

/** Writes (or replaces) the local user `name`'s entry. */
export const writeLocalUser = (dataDir: string, name: string, entry: string): string => {
  if (!/^[A-Za-z0-9_-]+$/.test(name)) throw new Error(`local NATS user file '${name}': a name is one token of [A-Za-z0-9_-]`)
  const dir = localUsersDir(dataDir)
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  const file = join(dir, `${name}.conf`)
  writeFileSync(`${file}.tmp`, `${entry}\n`, { mode: 0o600 })
  renameSync(`${file}.tmp`, file)
  return file
}

/** The local users' entries, sorted by file name. */
export const localUsers = (dataDir: string): ReadonlyArray<string> => {
  const dir = localUsersDir(dataDir)
  if (!existsSync(dir)) return []
  return readdirSync(dir)
    .filter((f) => f.endsWith(".conf"))
    .sort()
    .map((f) => readFileSync(join(dir, f), "utf8").trim())
    .filter((e) => e !== "")
}

/** The store folder of the embedded server (`-sd`), inside the data dir. */
export const serverStoreDir = (dataDir: string): string => join(dataDir, "nats")

const JetStreamBlock = "jetstream {"

/**
 * The config the embedded nats-server runs from: nats.conf with the local users added and its
 * store named (`store_dir`: a reload keeps only what the config says, and a store given with
 * `-sd` alone makes nats-server refuse every reload), written to `<data dir>/nats.conf` (mode
 * 0600). Its path is what `wk start` passes to nats-server, so a reload (SIGHUP) re-reads the
 * users written since.
 */
export const composeServerConfig = (dataDir: string, shipped: string = defaultConfig): string => {
  const text = readFileSync(shipped, "utf8")
  if (!text.includes(Marker)) throw new Error(`${shipped} has no '${Marker}' list to add local users to`)
  if (!text.includes(JetStreamBlock)) throw new Error(`${shipped} has no '${JetStreamBlock}' block to name the store in`)
  const users = localUsers(dataDir)
  mkdirSync(dataDir, { recursive: true })
  const out = join(dataDir, "nats.conf")
  const withStore = text.replace(JetStreamBlock, `${JetStreamBlock}\n  store_dir: ${JSON.stringify(serverStoreDir(dataDir))}`)
  const composed = users.length === 0 ? withStore : withStore.replace(Marker, `${Marker}\n    # Local users (${localUsersDir(dataDir)}), added by wk start:\n${users.map((u) => `    ${u}`).join("\n")}`)
  writeFileSync(`${out}.tmp`, composed, { mode: 0o600 })
  renameSync(`${out}.tmp`, out)
  return out
}

/**
 * Makes the store's running nats-server (a live `wk start`) serve the local users now: rewrites
 * its config and sends it SIGHUP, nats-server's reload. Returns its pid, or undefined when none runs
 * (the next `wk start` reads them).
 */
export const reloadLocalServer = (dataDir: string): number | undefined => {
  const owner = storeOwner(dataDir)
  const pid = owner?.nats_pid
  if (pid === undefined) return undefined
  try {
    process.kill(pid, 0)
  } catch {
    return undefined
  }
  composeServerConfig(dataDir)
  process.kill(pid, "SIGHUP")
  return pid
}
