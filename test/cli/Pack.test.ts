import { afterAll, describe, expect, it } from "vitest"
import { execFile } from "node:child_process"
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { Effect } from "effect"
import type { NatsConnection } from "@nats-io/transport-node"
import { devPublicKey } from "../../runtime/client/DevKeys.js"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { loadProfileFiles } from "../../runtime/policy/ProfileFiles.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { connectAs } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"

// The package as `npm pack` makes it, installed into an empty project elsewhere: its `wk` bin
// must answer from there and from any other folder, using the compiled build it ships; its entry
// points (package.json `exports`) import under plain node with their type declarations; and
// docs/agent-sdks.md's examples (docs/examples/), copied into that project with each SDK, make a
// governed call against a kernel. Runs in CI (CI set; .ci/run has run `npm ci`, so the build
// exists and the npm cache holds every dependency): installing takes a while and reads the npm cache.
const run = promisify(execFile)
const dirs: Array<string> = []
const temp = (prefix: string) => {
  const d = mkdtempSync(join(tmpdir(), prefix))
  dirs.push(d)
  return d
}

let nats: TestNats | undefined
let kernel: InProcessKernel | undefined
let bankConn: NatsConnection | undefined

afterAll(async () => {
  await kernel?.stop()
  await bankConn?.close()
  await nats?.dispose()
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
}, 300_000)

/** The version of a package this repository installed: the one the npm cache holds. */
const installedVersion = (name: string) => (JSON.parse(readFileSync(join(repoRoot, "node_modules", name, "package.json"), "utf8")) as { version: string }).version
const sdks = ["ai", "@openai/agents", "@langchain/langgraph", "@langchain/core", "zod"]

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
    const peers = sdks.map((n) => `${n}@${installedVersion(n)}`)
    await run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts", join(out, tarball!), ...peers], { cwd: project, timeout: 600_000 })
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

    // Every entry point imports under plain node, and ships its type declarations.
    const pkg = JSON.parse(readFileSync(join(installed, "package.json"), "utf8")) as { exports: Record<string, string | { types: string; default: string }> }
    const entries = Object.entries(pkg.exports).filter((e): e is [string, { types: string; default: string }] => typeof e[1] !== "string")
    expect(entries.map(([k]) => k)).toEqual(expect.arrayContaining(["./client", "./ai", "./openai-agents", "./langgraph", "./mcp"]))
    for (const [name, target] of entries) {
      expect(existsSync(join(installed, target.types)), `${name} types`).toBe(true)
      const probe = await run(process.execPath, ["--input-type=module", "-e", `const m = await import("witness-kernel/${name.slice(2)}"); console.log(Object.keys(m).join(","))`], { cwd: project, timeout: 60_000 })
      expect(probe.stdout.trim(), name).not.toBe("")
    }

    // docs/agent-sdks.md's examples, as a user copies them, against a kernel with the example profiles and the demo bank.
    nats = await startTestNats()
    kernel = await startKernel(nats.servers, await Effect.runPromise(loadProfileFiles(join(repoRoot, "profiles"))))
    bankConn = await connectAs(nats.servers, "bank")
    const bank = new DemoBank().serve(bankConn)
    const examples = join(repoRoot, "docs", "examples")
    for (const f of readdirSync(examples)) copyFileSync(join(examples, f), join(project, f))
    for (const example of ["ai-sdk.mjs", "openai-agents.mjs", "langgraph.mjs"]) {
      const before = bank.effects
      const r = await run(process.execPath, [example], { cwd: project, timeout: 120_000, env: { ...process.env, NATS_URL: nats.servers } })
      expect(r.stdout, example).toContain('"status":"completed"')
      expect(bank.effects - before, example).toBe(1)
    }
  }, 900_000)
})
