import { afterAll, describe, expect, it } from "vitest"
import { execFile } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { devPublicKey } from "../../runtime/client/DevKeys.js"
import { repoRoot } from "../../runtime/cli/Paths.js"

// The package as `npm pack` makes it, installed into an empty project elsewhere: its `wk` bin
// must answer from there and from any other folder, using the compiled build it ships. Runs in
// CI (CI set; .ci/run has run `npm ci`, so the build exists and the npm cache holds every
// dependency): installing takes a while and reads the npm cache.
const run = promisify(execFile)
const dirs: Array<string> = []
const temp = (prefix: string) => {
  const d = mkdtempSync(join(tmpdir(), prefix))
  dirs.push(d)
  return d
}

afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

describe.runIf(process.env["CI"])("npm pack", () => {
  it("the packed wk runs from an install elsewhere, from any folder, on the compiled build", async () => {
    expect(existsSync(join(repoRoot, "build", "runtime", "cli", "main.js")), "build/ exists (npm ci runs `prepare`)").toBe(true)
    const out = temp("wk-pack-")
    // --ignore-scripts: the build exists; rebuilding here would rewrite build/ under other tests.
    await run("npm", ["pack", "--ignore-scripts", "--pack-destination", out], { cwd: repoRoot, timeout: 120_000 })
    const tarball = readdirSync(out).find((f) => f.endsWith(".tgz"))
    expect(tarball).toBeDefined()
    const project = temp("wk-install-")
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "wk-consumer", version: "1.0.0", private: true }))
    await run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts", join(out, tarball!)], { cwd: project, timeout: 600_000 })
    const wk = join(project, "node_modules", ".bin", "wk")
    const installed = join(project, "node_modules", "witness-kernel")
    expect(existsSync(join(installed, "build", "runtime", "cli", "main.js")), "the tarball ships build/").toBe(true)
    const elsewhere = temp("wk-cwd-")
    const version = await run(wk, ["--version"], { cwd: elsewhere, timeout: 60_000 })
    expect(version.stdout.trim()).toBe("0.1.0")
    const help = await run(wk, ["--help"], { cwd: elsewhere, timeout: 60_000 })
    expect(help.stdout).toContain("Usage: wk <command>")
    // A command that loads effect and the client: resolved from the installed package, not this folder.
    const key = await run(wk, ["dev-key", "user:carol", "--json"], { cwd: elsewhere, timeout: 60_000, env: { ...process.env, NODE_PATH: "" } })
    expect(JSON.parse(key.stdout)).toMatchObject({ public_key: devPublicKey("user:carol") })
    // The example profiles ship with the package and are found from the installed copy.
    const explain = await run(wk, ["profile", "explain", "money_transfer", "--principal", "agent:alice", "--json"], { cwd: elsewhere, timeout: 60_000 })
    expect(JSON.parse(explain.stdout)).toMatchObject({ principal: "agent:alice", grant: { granted: true } })
  }, 900_000)
})
