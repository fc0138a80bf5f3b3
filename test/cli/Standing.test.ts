import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventually } from "../support/Stream.js"
import { ExitCode } from "../../runtime/cli/Exit.js"
import { repoRoot } from "../../runtime/cli/Paths.js"

// `wk standing` as a child process: grant from flags, the kernel applies it, ls shows the use,
// revoke stops it; bad flags are usage errors that sign nothing.
let nats: TestNats
let kernel: InProcessKernel
let bank: DemoBank
let conns: Array<NatsConnection> = []
let alice: WitnessClient

const run = promisify(execFile)
const elsewhere = mkdtempSync(join(tmpdir(), "wk-cwd-"))
const configDir = mkdtempSync(join(tmpdir(), "wk-config-"))
const wk = async (...args: Array<string>) => {
  const env: Record<string, string | undefined> = { ...process.env, NATS_URL: `nats://${nats.servers}`, WK_CONFIG_DIR: configDir }
  delete env["WK_CONTEXT"]
  try {
    const r = await run(process.execPath, [join(repoRoot, "runtime", "cli", "wk.mjs"), ...args], { cwd: elsewhere, env, timeout: 30_000 })
    return { code: 0, stdout: r.stdout, stderr: r.stderr }
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string }
    return { code: x.code, stdout: x.stdout, stderr: x.stderr }
  }
}

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [testProfile()])
  const toolConn = await connectAs(nats.servers, "bank")
  bank = new DemoBank().serve(toolConn)
  const agentConn = await connectAs(nats.servers, "agent")
  conns = [toolConn, agentConn]
  alice = clientFor(agentConn, "agent:alice")
}, 60_000)

afterAll(async () => {
  await kernel?.stop()
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
  rmSync(elsewhere, { recursive: true, force: true })
  rmSync(configDir, { recursive: true, force: true })
})

describe("wk standing", () => {
  it("grant from flags; a matching call is released by it; ls shows the use; revoke stops it", async () => {
    const g = await wk("standing", "grant", "--principal", "user:carol", "--class", "human", "--tool", "money_transfer", "--for", "agent:alice", "--eq", "from=a", "--eq", "to=bob", "--max", "amount=5000", "--hours", "2", "--uses", "3", "--id", "cli-grant", "--reason", "payroll")
    expect(g.code).toBe(0)
    expect(g.stdout).toContain("standing approval recorded")
    expect(g.stdout).toContain("uses        0 of 3")
    const before = bank.effects
    const r = (await alice.propose({ session_id: "s-cli", turn_id: "t1", call_id: "std1", tool: "money_transfer", args: { from: "a", to: "bob", amount: 4_000 } })) as { held_id: string }
    await eventually(async () => bank.effects === before + 1)
    const ls = await wk("standing", "ls", "--principal", "user:carol")
    expect(ls.stdout).toContain(`uses        1 of 3: ${r.held_id}`)
    const rv = await wk("standing", "revoke", "cli-grant", "--principal", "user:carol", "--reason", "done")
    expect(rv.code).toBe(0)
    expect(rv.stdout).toContain("REVOKED")
    const after = (await alice.propose({ session_id: "s-cli", turn_id: "t1", call_id: "std2", tool: "money_transfer", args: { from: "a", to: "bob", amount: 4_000 } })) as { status: number }
    expect(after.status).toBe(202)
  })

  it("a bound that is not FIELD=VALUE, or a --max that is not a number, is a usage error and nothing is granted", async () => {
    const bad = await wk("standing", "grant", "--principal", "user:carol", "--class", "human", "--tool", "money_transfer", "--for", "agent:alice", "--max", "amount=lots", "--hours", "1", "--uses", "1", "--id", "bad-grant")
    expect(bad.code).toBe(ExitCode.usage)
    expect(bad.stderr + bad.stdout).toContain("--max amount=lots: the bound must be a number")
    expect((await wk("standing", "grant", "--principal", "user:carol", "--class", "human", "--tool", "money_transfer", "--for", "agent:alice", "--eq", "nobound", "--hours", "1", "--uses", "1")).code).toBe(ExitCode.usage)
    expect((await wk("standing", "ls", "--principal", "user:carol")).stdout).not.toContain("bad-grant")
  })

  it("a refused grant (for the witness itself) exits non-zero with the kernel's reason", async () => {
    const r = await wk("standing", "grant", "--principal", "user:carol", "--class", "human", "--tool", "money_transfer", "--for", "user:carol", "--hours", "1", "--uses", "1")
    expect(r.code).not.toBe(0)
    expect(r.stdout).toContain("cannot approve its own calls")
  })
})
