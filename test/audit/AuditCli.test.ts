import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type Server, type Socket } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { startNatsServer, type RunningNats } from "../../runtime/cli/EmbeddedNats.js"
import { testNatsConfig } from "../support/TestNats.js"
import { eventually } from "../support/Stream.js"

// The audit CLI tells the truth about how it ended: a signal or a missing JetStream is a
// non-zero exit with a line saying why, never a silent 0 or a hang.
const wk = (args: ReadonlyArray<string>) => {
  const env: Record<string, string | undefined> = { ...process.env, NATS_URL: "" }
  delete env["WK_CONTEXT"]
  const child = spawn(process.execPath, [join(repoRoot, "runtime", "cli", "wk.mjs"), ...args], { cwd: repoRoot, env, stdio: ["ignore", "pipe", "pipe"] })
  let stderr = ""
  let stdout = ""
  child.stderr.on("data", (d: Buffer) => void (stderr += d.toString()))
  child.stdout.on("data", (d: Buffer) => void (stdout += d.toString()))
  const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>((resolve) =>
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }))
  )
  return { child, done }
}

describe("wk audit replay against a server without JetStream", () => {
  let server: RunningNats
  let dir: string
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "wk-nojs-"))
    const config = join(dir, "nats.conf")
    writeFileSync(config, readFileSync(testNatsConfig(), "utf8").replace(/jetstream \{[^}]*\}/, ""))
    server = await startNatsServer({ config, storeDir: join(dir, "store") })
  })
  afterAll(async () => {
    await server?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it("fails with a line naming the missing JetStream and exits non-zero (it does not hang)", async () => {
    const r = await wk(["audit", "replay", "--server", `nats://127.0.0.1:${server.port}`, "--no-trust", "--quiet"]).done
    expect(r.stderr).toContain("jetstream is not enabled")
    expect(r.code).not.toBe(0)
    expect(r.code).not.toBeNull()
  }, 60_000)
})

describe("wk audit replay stopped by a signal", () => {
  // A server that accepts the connection and never speaks: the replay is waiting when the signal comes.
  let silent: Server
  const sockets: Array<Socket> = []
  beforeAll(async () => {
    silent = createServer((s) => void sockets.push(s))
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve))
  })
  afterAll(async () => {
    for (const s of sockets) s.destroy()
    await new Promise((resolve) => silent.close(resolve))
  })

  it("SIGTERM: exits 143 and says the replay has no verdict", async () => {
    const port = (silent.address() as { port: number }).port
    const run = wk(["audit", "replay", "--server", `nats://127.0.0.1:${port}`, "--no-trust", "--quiet"])
    await eventually(async () => sockets.length > 0, 60_000)
    run.child.kill("SIGTERM")
    const r = await run.done
    expect(r.stderr).toContain("wk audit replay: interrupted by SIGTERM before it finished: no verdict")
    expect(r.code).toBe(143)
    expect(r.stdout).not.toContain("OK")
  }, 90_000)
})
