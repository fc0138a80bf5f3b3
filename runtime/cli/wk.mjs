#!/usr/bin/env node
// The `wk` binary: runs the TypeScript CLI through tsx (no build step).
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { dirname, join } from "node:path"
const here = dirname(fileURLToPath(import.meta.url))
const r = spawnSync(process.execPath, ["--disable-warning=ExperimentalWarning", "--import", "tsx", join(here, "main.ts"), ...process.argv.slice(2)], { stdio: "inherit" })
process.exit(r.status ?? 1)
