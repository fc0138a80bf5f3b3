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
 * The repository (package) root: the sources live in runtime/cli/, the compiled CLI in
 * build/runtime/cli/, so the root is found by walking up to package.json, not by a fixed depth.
 */
export const repoRoot = packageRootOf(dirname(fileURLToPath(import.meta.url)))
export const defaultConfig = join(repoRoot, "nats.conf")
export const defaultProfiles = process.env["WK_PROFILES"] ?? join(repoRoot, "profiles")
export const defaultDataDir = process.env["WK_DATA_DIR"] ?? join(repoRoot, ".wk")
