import { readFileSync } from "node:fs"
import { join } from "node:path"
import { runInNewContext } from "node:vm"
import { repoRoot } from "../../runtime/cli/Paths.js"

/**
 * Runs the inbox's browser scripts (runtime/gateway/inbox/<file>, in order, sharing one `window`,
 * as the page loads them) without a browser and returns what the last puts on `window` as `name`.
 */
export const inboxScripts = <A>(files: ReadonlyArray<string>, name: string, globals: Record<string, unknown> = {}): A => {
  const window: Record<string, unknown> = { ...globals }
  for (const file of files) runInNewContext(readFileSync(join(repoRoot, "runtime/gateway/inbox", file), "utf8"), { window, ...globals })
  return window[name] as A
}

/** Runs one of the inbox's browser scripts without a browser and returns what it puts on `window`. */
export const inboxScript = <A>(file: string, name: string, globals: Record<string, unknown> = {}): A => inboxScripts([file], name, globals)
