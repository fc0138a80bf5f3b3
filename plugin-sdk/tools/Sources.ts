import { readdirSync, statSync } from "node:fs"
import { join } from "node:path"

/** Every folder under `root` with a `plugin.ts`, sorted. */
export const findPluginSources = (root: string): ReadonlyArray<string> => {
  const out: string[] = []
  const walk = (dir: string) => {
    const names = readdirSync(dir)
    if (names.includes("plugin.ts")) out.push(dir)
    for (const n of names) {
      if (n === "node_modules" || n.startsWith(".")) continue
      const p = join(dir, n)
      if (statSync(p).isDirectory()) walk(p)
    }
  }
  walk(root)
  return out.sort()
}
