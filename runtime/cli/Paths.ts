import { join } from "node:path"
import { packageRoot } from "../observability/PackageRoot.js"

/** The repository (package) root; see observability/PackageRoot.ts. */
export const repoRoot = packageRoot
export const defaultConfig = join(repoRoot, "nats.conf")
export const defaultProfiles = process.env["WK_PROFILES"] ?? join(repoRoot, "profiles")
export const defaultDataDir = process.env["WK_DATA_DIR"] ?? join(repoRoot, ".wk")
