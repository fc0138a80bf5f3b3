import { existsSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { dirname, join } from "node:path"

/** The nearest folder at or above `from` that holds a package.json. */
const packageRootOf = (from: string): string => {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, "package.json"))) return dir
    if (dirname(dir) === dir) return from
  }
}

/**
 * The kernel's package root (its profiles, docs and the inbox's files live under it): the sources
 * live in runtime/observability/, the compiled build in build/runtime/observability/ and the bundled
 * CLI in build/cli/, so the root is found by walking up to package.json, not by a fixed depth.
 */
export const packageRoot = packageRootOf(dirname(fileURLToPath(import.meta.url)))
