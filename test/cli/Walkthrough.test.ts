import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { loadProfileFiles } from "../../runtime/policy/ProfileFiles.js"
import { ExitCode } from "../../runtime/cli/Exit.js"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { connectAs } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"

// The README's "Try it" and "Five-minute walk-through" commands, extracted from its code blocks
// and run as written by bash (`wk` is the bin, `<held_id>` the id the propose line printed),
// against the example profiles, a kernel, the demo bank and a nats-server of this test. The
// README's TypeScript example runs too. If the README and the code drift apart, this fails.

const readme = readFileSync(join(repoRoot, "README.md"), "utf8")

/** The first fenced block of `lang` after the heading `## title`. */
const block = (title: string, lang: string): string => {
  const at = readme.indexOf(`\n## ${title}\n`)
  expect(at, `README has a "## ${title}" section`).toBeGreaterThan(0)
  const m = new RegExp("```" + lang + "\\n([\\s\\S]*?)```").exec(readme.slice(at))
  expect(m, `"## ${title}" has a ${lang} block`).not.toBeNull()
  return m![1]!
}

/** Each command line of a shell block and the outcome its comment states. */
const commands = (text: string) =>
  text
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => {
      const [command, ...comment] = l.split(/\s+#\s+/)
      return { command: command!.trim(), says: comment.join(" # ") }
    })

/** The outcome word a comment starts with, and the exit code docs/cli.md gives it. */
const outcomeExit: Record<string, number> = { completed: ExitCode.ok, held: ExitCode.held, denied: ExitCode.denied, accepted: ExitCode.ok }
const statedOutcome = (says: string) => /^(completed|held|denied|accepted)\b/.exec(says)?.[1]

let nats: TestNats
let kernel: InProcessKernel
let bank: DemoBank
let toolConn: NatsConnection
let configDir: string

const bin = join(repoRoot, "runtime", "cli", "wk.mjs")
const env = () => {
  const e: Record<string, string | undefined> = { ...process.env, WK_NATS_PORT: String(nats.port), WK_CONFIG_DIR: configDir, NO_COLOR: "1" }
  delete e["NATS_URL"]
  delete e["WK_CONTEXT"]
  return e
}

interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs one README line with bash in the repository, `wk` defined as the bin. */
const sh = (line: string): { done: Promise<Run>; output: () => string } => {
  const child = spawn("bash", ["-c", `wk() { node "${bin}" "$@"; }\n${line}`], { cwd: repoRoot, env: env() })
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()))
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
  const done = new Promise<Run>((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr })))
  return { done, output: () => stdout }
}

const heldIdIn = (text: string) => /\b(h_[0-9a-f]{32})\b/.exec(text)?.[1]

beforeAll(async () => {
  configDir = mkdtempSync(join(tmpdir(), "wk-config-"))
  nats = await startTestNats()
  const profiles = await Effect.runPromise(loadProfileFiles(join(repoRoot, "profiles")))
  kernel = await startKernel(nats.servers, profiles)
  toolConn = await connectAs(nats.servers, "bank")
  bank = new DemoBank().serve(toolConn)
}, 120_000)

afterAll(async () => {
  await kernel?.stop()
  await toolConn?.close()
  await nats?.dispose()
  rmSync(configDir, { recursive: true, force: true })
})

describe("README walkthrough, run as written", () => {
  it("Try it: 250 completes (exit 0, one bank effect), 2,500 is held (exit 3) with a held_id", async () => {
    const lines = commands(block("Try it", "sh"))
    expect(lines.map((l) => statedOutcome(l.says))).toEqual(["completed", "held"])
    const before = bank.effects
    const small = await sh(lines[0]!.command).done
    expect(small.code, small.stderr).toBe(ExitCode.ok)
    expect(small.stdout).toMatch(/^completed/)
    expect(bank.effects - before).toBe(1)
    const big = await sh(lines[1]!.command).done
    expect(big.code, big.stderr).toBe(ExitCode.held)
    expect(big.stdout).toMatch(/^held/)
    expect(heldIdIn(big.stdout)).toBeDefined()
    expect(bank.effects - before).toBe(1)
  }, 180_000)

  it("Five-minute walk-through: carol alone leaves the call open, the fraud service completes it, once", async () => {
    const lines = commands(block("Five-minute walk-through", "sh"))
    let heldId: string | undefined
    let watch: ReturnType<typeof sh> | undefined
    const before = bank.effects
    for (const { command, says } of lines) {
      const background = command.endsWith("&")
      const line = command.replace(/&$/, "").trim()
      if (line.includes("<held_id>")) expect(heldId, `a held_id before: ${line}`).toBeDefined()
      const runnable = line.replaceAll("<held_id>", heldId ?? "")
      if (background) {
        watch = sh(runnable)
        await expect.poll(() => watch!.output(), { timeout: 60_000, interval: 200 }).toContain("call.held")
        continue
      }
      const r = await sh(runnable).done
      const stated = statedOutcome(says)
      expect(r.code, `${line}\n${r.stderr}`).toBe(stated === undefined ? ExitCode.ok : outcomeExit[stated])
      if (stated === "completed" || stated === "held") expect(r.stdout, line).toMatch(new RegExp(`^${stated}`))
      if (stated === "accepted") expect(r.stdout, line).toContain('"disposition":"accepted"')
      if (line.startsWith("wk propose")) heldId = heldIdIn(r.stdout)
      if (line.startsWith("wk held ls")) expect(r.stdout).toMatch(new RegExp(`${heldId}\\s+open/unsatisfied`))
      if (line.startsWith("wk held show")) expect(r.stdout).toContain(`held call   ${heldId}`)
      if (line.includes("--principal user:carol")) {
        // "still open": the rule is (human AND fraud) OR breakglass.
        const show = await sh(`wk held show ${heldId} --json`).done
        expect(JSON.parse(show.stdout)).toMatchObject({ lifecycle: "open" })
        expect(bank.effects - before).toBe(0)
      }
      if (line.startsWith("wk result")) {
        expect(r.stdout).toContain('"amount":2500')
        expect(bank.effects - before).toBe(1)
      }
      if (line.startsWith("wk status")) expect(r.stdout).toContain("policy epoch")
      if (line.startsWith("wk audit replay")) expect(r.stdout).not.toContain("FAIL")
    }
    expect(heldId).toBeDefined()
    expect(watch, "the walk-through watches the call").toBeDefined()
    const watched = await watch!.done
    expect(watched.code).toBe(0)
    expect(watched.stdout).toContain("ended completed")
    expect(bank.effects - before).toBe(1)
  }, 300_000)

  it("the TypeScript example completes the transfer with carol and the fraud service", async () => {
    const source = block("Try it", "ts")
      .replaceAll('"./runtime/', `"${repoRoot}/runtime/`)
      .replace('"127.0.0.1:4322"', `"${nats.servers}"`)
    const file = join(mkdtempSync(join(tmpdir(), "wk-readme-")), "example.mts")
    writeFileSync(file, source)
    const before = bank.effects
    const child = spawn(process.execPath, ["--import", "tsx", file], { cwd: repoRoot, env: env() })
    let out = ""
    child.stdout.on("data", (d: Buffer) => (out += d.toString()))
    child.stderr.on("data", (d: Buffer) => (out += d.toString()))
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve))
    expect(code, out).toBe(0)
    expect(out).toContain("outcome: 'completed'")
    expect(out).toContain("amount: 2500")
    expect(bank.effects - before).toBe(1)
  }, 180_000)
})
