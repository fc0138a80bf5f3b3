import { execFile } from "node:child_process"
import { join } from "node:path"
import { promisify } from "node:util"
import { repoRoot } from "../../runtime/cli/Paths.js"

const run = promisify(execFile)

/** What one `wk` process printed and how it exited. */
export interface WkRun {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/**
 * Runs `wk` as a user would, from another directory (`cwd`), against `servers` with no saved
 * context, its config in `configDir`.
 */
export const wkIn = (servers: () => string, cwd: string, configDir: string) => async (...args: Array<string>): Promise<WkRun> => {
  const env: Record<string, string | undefined> = { ...process.env, NATS_URL: `nats://${servers()}`, WK_CONFIG_DIR: configDir }
  delete env["WK_CONTEXT"]
  try {
    const r = await run(process.execPath, [join(repoRoot, "runtime", "cli", "wk.mjs"), ...args], { cwd, env, timeout: 90_000 })
    return { code: 0, stdout: r.stdout, stderr: r.stderr }
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string }
    return { code: x.code, stdout: x.stdout, stderr: x.stderr }
  }
}
