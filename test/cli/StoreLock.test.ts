import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { spawn, spawnSync, type ChildProcess } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { freePort, portInUse } from "../../runtime/cli/EmbeddedNats.js"
import { lockStore, StoreInUse, StoreLockFile, storeOwner } from "../../runtime/cli/StoreLock.js"
import { ExitCode } from "../../runtime/cli/Exit.js"
import { startTestNats } from "../support/TestNats.js"

// One process owns a store. Two `wk start` on one store folder, the second asking for another
// port (what the old "port in use" hint said to do): the second is refused with one line naming
// the first, starts no nats-server, and the first keeps everything it committed, across a
// restart, with the audit clean. The lock itself: a stale one is replaced, a live one or a
// nats-server left running on the store refuses.

const bin = join(repoRoot, "runtime", "cli", "wk.mjs")
const dataDir = mkdtempSync(join(tmpdir(), "wk-store-"))
const configDir = mkdtempSync(join(tmpdir(), "wk-config-"))
const env = () => {
  const e: Record<string, string | undefined> = { ...process.env, WK_DATA_DIR: dataDir, WK_CONFIG_DIR: configDir, WK_METRICS_PORT: "0", NO_COLOR: "1" }
  delete e["NATS_URL"]
  delete e["WK_CONTEXT"]
  delete e["WK_KERNEL_KEY"]
  return e
}

interface Started {
  readonly child: ChildProcess
  readonly output: () => string
  readonly exited: Promise<number | null>
}

/** Runs `wk start --dev --port <port>` on the test's store; resolves once it is ready or has exited. */
const start = async (port: number): Promise<Started> => {
  const child = spawn(process.execPath, ["--disable-warning=ExperimentalWarning", bin, "start", "--dev", "--port", String(port)], { cwd: repoRoot, env: env(), stdio: ["ignore", "pipe", "pipe"] })
  let out = ""
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()))
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()))
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  await Promise.race([exited, new Promise<void>((resolve) => child.stdout!.on("data", () => out.includes("Witness Kernel ready") && resolve()))])
  return { child, output: () => out, exited }
}

const stop = async (s: Started | undefined) => {
  if (s === undefined || s.child.exitCode !== null || s.child.signalCode !== null) return
  s.child.kill("SIGINT")
  await s.exited
}

/** Runs one `wk` command against the first instance's server. */
const wk = (port: number, ...args: Array<string>) => {
  const r = spawnSync(process.execPath, ["--disable-warning=ExperimentalWarning", bin, ...args, "--server", `nats://127.0.0.1:${port}`], { cwd: repoRoot, env: env(), encoding: "utf8", timeout: 90_000 })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

let first: Started | undefined
let again: Started | undefined

afterAll(async () => {
  await stop(first)
  await stop(again)
  rmSync(dataDir, { recursive: true, force: true })
  rmSync(configDir, { recursive: true, force: true })
})

describe("two wk start on one store", () => {
  let port = 0
  let other = 0
  beforeAll(async () => {
    port = await freePort()
    other = await freePort()
    first = await start(port)
    expect(first.output(), first.output()).toContain("Witness Kernel ready")
  }, 120_000)

  it("the second is refused with one line naming the first; it starts no server; nothing is lost, across a restart, and the audit is clean", async () => {
    const small = wk(port, "propose", "money_transfer", '{"from":"alice","to":"bob","amount":10}')
    expect(small.code, small.stderr).toBe(ExitCode.ok)
    const big = wk(port, "propose", "money_transfer", '{"from":"alice","to":"bob","amount":2500}')
    expect(big.code, big.stdout + big.stderr).toBe(ExitCode.held)
    const heldId = /\b(h_[0-9a-f]{32})\b/.exec(big.stdout)![1]!

    const second = await start(other)
    const code = await second.exited
    expect(code).toBe(ExitCode.failed)
    const said = second.output().split("\n").filter((l) => l.trim() !== "" && !l.startsWith("DEVELOPMENT MODE") && !l.startsWith("  - ") && !l.startsWith("commits signed"))
    expect(said).toEqual([`wk: the store ${dataDir} is held by wk start (pid ${first!.child.pid}, NATS nats://127.0.0.1:${port}, since ${storeOwner(dataDir)!.started_at}): stop that instance (Ctrl-C in its terminal, or kill ${first!.child.pid}), or use it (--server nats://127.0.0.1:${port}), or set WK_DATA_DIR to another folder for a second instance`])
    expect(await portInUse(other)).toBe(false)
    expect(storeOwner(dataDir)?.pid).toBe(first!.child.pid)

    const shown = wk(port, "held", "show", heldId, "--json")
    expect(shown.code, shown.stderr).toBe(0)
    expect(JSON.parse(shown.stdout)).toMatchObject({ held_id: heldId, lifecycle: "open" })

    await stop(first)
    expect(existsSync(join(dataDir, StoreLockFile))).toBe(false)
    again = await start(port)
    expect(again.output(), again.output()).toContain("Witness Kernel ready")
    const kept = wk(port, "held", "show", heldId, "--json")
    expect(JSON.parse(kept.stdout)).toMatchObject({ held_id: heldId, lifecycle: "open" })
    const audit = wk(port, "audit", "replay", "--no-trust")
    expect(audit.code, audit.stdout + audit.stderr).toBe(0)
    expect(audit.stdout).toContain(" 2 held calls")
    expect(audit.stdout).toContain("OK: no violations")
    expect(audit.stdout).not.toContain("FAIL")
  }, 300_000)
})

describe("the store lock", () => {
  /** A pid no process runs: one that ran and exited. */
  const deadPid = () => spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" }).stdout

  it("replaces a lock whose process is gone; refuses one whose process runs; releases only its own", () => {
    const dir = mkdtempSync(join(tmpdir(), "wk-lock-"))
    writeFileSync(join(dir, StoreLockFile), JSON.stringify({ pid: Number(deadPid()), started_at: "2026-01-01T00:00:00.000Z" }))
    const lock = lockStore(dir)
    expect(storeOwner(dir)?.pid).toBe(process.pid)
    expect(() => lockStore(dir)).toThrow(StoreInUse)
    lock.serving(4242, "nats://127.0.0.1:4999")
    expect(storeOwner(dir)).toMatchObject({ pid: process.pid, nats_pid: 4242, nats_url: "nats://127.0.0.1:4999" })
    lock.release()
    expect(existsSync(join(dir, StoreLockFile))).toBe(false)
    // A garbled lock file names no live holder: replaced.
    writeFileSync(join(dir, StoreLockFile), "{not json")
    lockStore(dir).release()
    rmSync(dir, { recursive: true, force: true })
  })

  it("a nats-server left running on the store by a wk start that is gone holds it: refused, naming that server", async () => {
    const nats = await startTestNats()
    const dir = mkdtempSync(join(tmpdir(), "wk-lock-"))
    try {
      writeFileSync(join(dir, StoreLockFile), JSON.stringify({ pid: Number(deadPid()), started_at: "2026-01-01T00:00:00.000Z", nats_pid: nats.pid, nats_url: nats.url }))
      expect(() => lockStore(dir)).toThrow(`the store ${dir} is still served by nats-server (pid ${nats.pid}, ${nats.url}) of a wk start that is gone: stop it (kill ${nats.pid})`)
      expect(JSON.parse(readFileSync(join(dir, StoreLockFile), "utf8"))).toMatchObject({ nats_pid: nats.pid })
      // Once that server is gone, the lock is stale.
      await nats.stop()
      const lock = lockStore(dir)
      expect(storeOwner(dir)?.pid).toBe(process.pid)
      lock.release()
    } finally {
      await nats.dispose()
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
