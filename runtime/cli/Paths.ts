import { fileURLToPath } from "node:url"
import { dirname, join, resolve } from "node:path"

/** The repository root (runtime/cli/ is two levels down). */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..")
export const defaultConfig = join(repoRoot, "nats.conf")
export const defaultProfiles = process.env["WK_PROFILES"] ?? join(repoRoot, "profiles")
export const defaultDataDir = process.env["WK_DATA_DIR"] ?? join(repoRoot, ".wk")
