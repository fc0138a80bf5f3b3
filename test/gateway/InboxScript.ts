import { readFileSync } from "node:fs"
import { join } from "node:path"
import { runInNewContext } from "node:vm"
import { repoRoot } from "../../runtime/cli/Paths.js"

/** Runs one of the inbox's browser scripts (runtime/gateway/inbox/<file>) without a browser and returns what it puts on `window`. */
export const inboxScript = <A>(file: string, name: string, globals: Record<string, unknown> = {}): A => {
  const window: Record<string, unknown> = { ...globals }
  runInNewContext(readFileSync(join(repoRoot, "runtime/gateway/inbox", file), "utf8"), { window, ...globals })
  return window[name] as A
}
