import { existsSync, readFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

/** The kernel's version: its package's, found upward from this module (source or compiled build). */
export const KernelVersion: string = (() => {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (let i = 0; i < 6; i++) {
    const file = join(dir, "package.json")
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, "utf8")) as { name?: string; version?: string }
      if (pkg.name === "witness-kernel" && pkg.version !== undefined) return pkg.version
    }
    dir = dirname(dir)
  }
  return "unknown"
})()
