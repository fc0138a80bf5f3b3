import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { ExitCode, exitOfReply } from "../../runtime/cli/Exit.js"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"

// `wk policy eval` and `wk policy test` decide offline with the kernel's own code; eval must give
// the verdict a live kernel gives under the same profile. `wk policy apply` signs a change.
const run = promisify(execFile)
const dir = mkdtempSync(join(tmpdir(), "wk-policy-"))
const configDir = mkdtempSync(join(tmpdir(), "wk-config-"))
let natsUrl = "nats://127.0.0.1:1" // nothing listens: eval and test need no NATS
const wk = async (...args: Array<string>) => {
  const env: Record<string, string | undefined> = { ...process.env, NATS_URL: natsUrl, WK_CONFIG_DIR: configDir }
  delete env["WK_CONTEXT"]
  try {
    const r = await run(process.execPath, [join(repoRoot, "runtime", "cli", "wk.mjs"), ...args], { cwd: dir, env, timeout: 90_000 })
    return { code: 0, stdout: r.stdout, stderr: r.stderr }
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string }
    return { code: x.code, stdout: x.stdout, stderr: x.stderr }
  }
}
const fixture = join(repoRoot, "test", "cli", "fixtures", "policy-tests.json")

afterAll(() => {
  rmSync(dir, { recursive: true, force: true })
  rmSync(configDir, { recursive: true, force: true })
})

describe("wk policy eval and test, offline", () => {
  it("eval gives the shipped profiles' decision with their pinned plugins, without NATS", async () => {
    const r = await wk("policy", "eval", "money_transfer", '{"from":"alice","to":"bob","amount":2500}', "--principal", "agent:alice", "--json")
    expect(r.stderr).toBe("")
    expect(r.code).toBe(ExitCode.held) // the exit code is the verdict's, as wk propose's
    const e = JSON.parse(r.stdout)
    expect(e.verdict).toBe("REQUIRE_WITNESS")
    expect(e.rule).toEqual({ any: [{ all: [{ class: "human" }, { class: "fraud" }] }, { class: "breakglass" }] })
    expect(e.decisions.map((d: { by: string }) => d.by)).toContain("plugin:spend-limit@1.0.0")
    const bad = await wk("policy", "eval", "money_transfer", "{not json", "--principal", "agent:alice")
    expect(bad.code).toBe(ExitCode.usage)
    expect(bad.stderr).toMatch(/^wk: args-json is not JSON/)
  }, 120_000)

  it("test passes a table that matches and exits 1 naming each call that gets another decision", async () => {
    const ok = await wk("policy", "test", fixture)
    expect(ok.code).toBe(0)
    expect(ok.stdout).toContain("PASS: 3/3")
    const failing = join(dir, "failing.json")
    writeFileSync(failing, JSON.stringify({
      profiles: join(repoRoot, "profiles"),
      tests: [
        { name: "small", principal: "agent:alice", tool: "money_transfer", args: { from: "alice", to: "bob", amount: 25 }, expect: "ALLOW" },
        { name: "wrongly expected to run", principal: "agent:alice", tool: "money_transfer", args: { from: "alice", to: "bob", amount: 2500 }, expect: "ALLOW" }
      ]
    }))
    const r = await wk("policy", "test", failing)
    expect(r.code).toBe(ExitCode.failed)
    expect(r.stdout).toContain("PASS  small")
    expect(r.stdout).toMatch(/FAIL  wrongly expected to run: expected ALLOW, got REQUIRE_WITNESS/)
    expect(r.stdout).toContain("FAIL: 1/2")
    const malformed = join(dir, "malformed.json")
    writeFileSync(malformed, JSON.stringify({ tests: [{ principal: "agent:alice", tool: "money_transfer", args: {}, expect: "MAYBE" }] }))
    expect((await wk("policy", "test", malformed)).code).toBe(ExitCode.usage)
  }, 120_000)
})

describe("against a live kernel", () => {
  let nats: TestNats
  let kernel: InProcessKernel
  let conns: Array<NatsConnection> = []
  const profileFile = join(dir, "test-org.json")

  beforeAll(async () => {
    nats = await startTestNats()
    natsUrl = `nats://${nats.servers}`
    kernel = await startKernel(nats.servers, [testProfile()])
    conns = await Promise.all([connectAs(nats.servers, "bank"), connectAs(nats.servers, "agent")])
    new DemoBank().serve(conns[0]!)
    writeFileSync(profileFile, JSON.stringify(testProfile()))
  }, 120_000)

  afterAll(async () => {
    await kernel?.stop()
    await Promise.all(conns.map((c) => c.close()))
    await nats?.dispose()
  })

  it("eval's verdict is the kernel's for the same profile: allow, hold, deny", async () => {
    const alice = clientFor(conns[1]!, "agent:alice")
    const Status = { ALLOW: 200, REQUIRE_WITNESS: 202, DENY: 403 } as const
    for (const [i, amount] of [100, 2_500, 200_000].entries()) {
      const args = { from: `eval-${i}`, to: "shop", amount }
      const r = await wk("policy", "eval", "money_transfer", JSON.stringify(args), "--principal", "agent:alice", "--profiles", profileFile, "--json")
      const e = JSON.parse(r.stdout) as { verdict: keyof typeof Status }
      const live = await alice.propose({ session_id: "s-eval", turn_id: "t1", call_id: `eval${i}`, tool: "money_transfer", args })
      expect(live.status).toBe(Status[e.verdict])
      expect(r.code).toBe(exitOfReply(live))
    }
  }, 180_000)

  it("apply signs a narrowing as an admin: applied at once, exit 0; a non-admin is refused", async () => {
    const narrowing = join(dir, "narrowing.json")
    const p = testProfile()
    writeFileSync(narrowing, JSON.stringify({ ...p, rules: { money_transfer: { ...p.rules!["money_transfer"]!, witness_above: 900 } } }))
    const r = await wk("policy", "apply", narrowing, "--principal", "admin:root")
    expect(r.stderr).toBe("")
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/^applied: policy epoch \d+/)
    const refused = await wk("policy", "apply", narrowing, "--principal", "agent:alice")
    expect([ExitCode.denied, ExitCode.refused, ExitCode.unauthenticated]).toContain(refused.code)
  }, 120_000)
})
