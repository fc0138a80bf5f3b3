import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { spawn, spawnSync, type ChildProcess } from "node:child_process"
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs"
import { tmpdir } from "node:os"
import { basename, join } from "node:path"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { freePort } from "../../runtime/cli/EmbeddedNats.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"

// The image, without a docker daemon: the final stage of docs/deploy/Dockerfile read line by
// line and its files laid out in a folder as it says (COPY from the repository; the build
// stage's output compiled as its RUN does; its pruned node_modules linked), its ENV set, then
// its ENTRYPOINT run there: `wk --help`, `wk start --dev` against a nats-server (the image has
// none of its own), the HEALTHCHECK command, and one call that completes.

const dockerfile = readFileSync(join(repoRoot, "docs", "deploy", "Dockerfile"), "utf8")
const finalStage = dockerfile.slice(dockerfile.lastIndexOf("\nFROM ") + 1).split("\n")
const layout = mkdtempSync(join(tmpdir(), "wk-image-"))
const dataDir = mkdtempSync(join(tmpdir(), "wk-image-data-"))

/** The final stage's `ENV` pairs. */
const imageEnv = Object.fromEntries(
  finalStage.filter((l) => l.startsWith("ENV ")).flatMap((l) => l.slice(4).trim().split(/\s+/).map((kv) => kv.split("=") as [string, string]))
)
const entrypoint = JSON.parse(finalStage.find((l) => l.startsWith("ENTRYPOINT "))!.slice("ENTRYPOINT ".length)) as Array<string>
const healthcheck = finalStage.find((l) => l.startsWith("HEALTHCHECK "))!

/** Lays out one `COPY` line of the final stage. */
const copy = (line: string) => {
  const words = line.slice(5).trim().split(/\s+/)
  const from = words[0]!.startsWith("--from=") ? words.shift()!.slice("--from=".length) : undefined
  const dest = words.pop()!
  for (const src of words) {
    const target = dest.endsWith("/") ? join(layout, dest, basename(src)) : join(layout, dest)
    if (from === undefined) {
      // Docker keeps a copied file's modification time: the build stays newer than the sources, as in the image.
      cpSync(join(repoRoot, src), target, { recursive: true, preserveTimestamps: true })
    } else if (from === "build" && src === "/app/node_modules") {
      symlinkSync(join(repoRoot, "node_modules"), target)
    } else if (from === "build" && src === "/app/build") {
      // The build stage's `npm run -s build`, written where the final stage puts it.
      const tsc = spawnSync(process.execPath, [join(repoRoot, "node_modules", "typescript", "bin", "tsc"), "-p", join(repoRoot, "tsconfig.build.json"), "--outDir", target], { encoding: "utf8" })
      expect(tsc.status, tsc.stdout + tsc.stderr).toBe(0)
      const bundle = spawnSync(process.execPath, [join(repoRoot, "runtime", "cli", "bundleCli.mjs"), target], { encoding: "utf8" })
      expect(bundle.status, bundle.stdout + bundle.stderr).toBe(0)
    } else {
      throw new Error(`the Dockerfile copies ${src} from stage ${from}: teach this test how that stage makes it`)
    }
  }
}

const env = (extra: Record<string, string>) => {
  const e: Record<string, string | undefined> = { ...process.env, ...imageEnv, WK_DATA_DIR: dataDir, WK_CONFIG_DIR: dataDir, ...extra }
  delete e["WK_CONTEXT"]
  delete e["WK_KERNEL_KEY"]
  return e
}
/** Runs the image's ENTRYPOINT with `args` in the layout, to its end. */
const wk = (args: ReadonlyArray<string>, extra: Record<string, string> = {}) =>
  spawnSync(entrypoint[0] === "node" ? process.execPath : entrypoint[0]!, [...entrypoint.slice(1), ...args], { cwd: layout, env: env(extra), encoding: "utf8", timeout: 90_000 })

let nats: TestNats
let kernel: ChildProcess | undefined
let output = ""
let metricsPort = 0

beforeAll(async () => {
  mkdirSync(layout, { recursive: true })
  for (const line of finalStage.filter((l) => l.startsWith("COPY "))) copy(line)
  nats = await startTestNats()
}, 240_000)

afterAll(async () => {
  if (kernel !== undefined && kernel.exitCode === null && kernel.signalCode === null) {
    const exited = new Promise((resolve) => kernel!.once("exit", resolve))
    kernel.kill("SIGINT")
    await exited
  }
  await nats?.dispose()
  rmSync(layout, { recursive: true, force: true })
  rmSync(dataDir, { recursive: true, force: true })
})

describe("the image's file layout (docs/deploy/Dockerfile, final stage)", () => {
  it("runs wk --help", () => {
    const r = wk(["--help"])
    expect(r.status, r.stderr).toBe(0)
    expect(r.stdout).toContain("Usage: wk <command>")
  })

  it("runs wk start --dev against NATS; its HEALTHCHECK passes; one call completes", async () => {
    metricsPort = await freePort()
    kernel = spawn(process.execPath, [...entrypoint.slice(1), "start", "--dev"], {
      cwd: layout,
      env: env({ NATS_URL: `nats://kernel:kernel-dev@${nats.servers}`, WK_METRICS_PORT: String(metricsPort), WK_METRICS_HOST: "127.0.0.1" }),
      stdio: ["ignore", "pipe", "pipe"]
    })
    kernel.stdout!.on("data", (d: Buffer) => (output += d.toString()))
    kernel.stderr!.on("data", (d: Buffer) => (output += d.toString()))
    const exited = new Promise<number | null>((resolve) => kernel!.once("exit", resolve))
    const ready = new Promise<void>((resolve) => kernel!.stdout!.on("data", () => output.includes("Witness Kernel ready") && resolve()))
    await Promise.race([ready, exited])
    expect(output, output).toContain("Witness Kernel ready")
    expect(output).toContain(`demo bank`)

    // The HEALTHCHECK's command, as the container runtime runs it.
    const command = /CMD (node -e .*)$/.exec(healthcheck)![1]!
    const health = spawnSync("sh", ["-c", command], { cwd: layout, env: env({ WK_METRICS_PORT: String(metricsPort) }), encoding: "utf8", timeout: 30_000 })
    expect(health.status, health.stderr).toBe(0)

    const call = wk(["propose", "money_transfer", '{"from":"alice","to":"bob","amount":250}'], { NATS_URL: `nats://${nats.servers}` })
    expect(call.status, call.stderr).toBe(0)
    expect(call.stdout).toMatch(/^completed/)
  }, 240_000)
})
