import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { ExitCode } from "../../runtime/cli/Exit.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { wkIn, type WkRun } from "../support/WkProcess.js"

// The failures docs/cli.md names, each as a person meets them: one line on stderr starting
// `wk: `, that says what is wrong and what to do, and the documented exit code.
let nats: TestNats
const dir = mkdtempSync(join(tmpdir(), "wk-errors-"))
const configDir = mkdtempSync(join(tmpdir(), "wk-config-"))
let servers = () => nats.servers
const wk = wkIn(() => servers(), dir, configDir)

beforeAll(async () => {
  nats = await startTestNats()
}, 60_000)
afterAll(async () => {
  await nats?.dispose()
  rmSync(dir, { recursive: true, force: true })
  rmSync(configDir, { recursive: true, force: true })
})

/** The run failed with `code`, printing exactly one line on stderr, which is returned. */
const oneLine = (r: WkRun, code: number): string => {
  const lines = r.stderr.trim().split("\n")
  expect(lines, r.stderr).toHaveLength(1)
  expect(lines[0]).toMatch(/^wk: /)
  expect(lines[0]).not.toMatch(/[{}]"?cause|"code":/)
  expect(r.code, r.stderr).toBe(code)
  return lines[0]!
}

/** A port no one listens on, and one a program holds. */
const listening = (): Promise<Server> => new Promise((ok) => { const s = createServer(); s.listen(0, "127.0.0.1", () => ok(s)) })
const portOf = (s: Server) => (s.address() as { port: number }).port

describe("one-line errors with the documented exit code", () => {
  it("wk gateway with no NATS at the URL exits 7 (unreachable) saying how to start it", async () => {
    const closed = await listening()
    const port = portOf(closed)
    await new Promise((ok) => closed.close(ok))
    const saved = servers
    servers = () => `127.0.0.1:${port}`
    try {
      const line = oneLine(await wk("gateway", "--port", "0", "--metrics-port", "0"), ExitCode.unreachable)
      expect(line).toMatch(new RegExp(`^wk: cannot reach NATS at .*127\\.0\\.0\\.1:${port}.*npm start`))
    } finally {
      servers = saved
    }
  }, 60_000)

  it("wk gateway whose NATS login is refused exits 6 (unauthenticated) naming the user", async () => {
    const env = process.env
    process.env = { ...env, WK_GATEWAY_NATS_PASS: "not-the-password" }
    try {
      const line = oneLine(await wk("gateway", "--port", "0", "--metrics-port", "0"), ExitCode.unauthenticated)
      expect(line).toContain("refused user 'gateway'")
    } finally {
      process.env = env
    }
  }, 60_000)

  it("wk gateway on a port another program holds exits 1 naming the port and how to choose another", async () => {
    const busy = await listening()
    try {
      const line = oneLine(await wk("gateway", "--port", String(portOf(busy)), "--metrics-port", "0"), ExitCode.failed)
      expect(line).toBe(`wk: port ${portOf(busy)} on 127.0.0.1 is in use by another program: stop it, or serve on another port (--port N, or WK_GATEWAY_PORT)`)
    } finally {
      busy.close()
    }
  }, 60_000)

  it("wk policy test with a malformed file exits 2 naming the field, or saying it is not JSON", async () => {
    const bad = join(dir, "bad-expect.json")
    writeFileSync(bad, JSON.stringify({ tests: [{ principal: "agent:alice", tool: "money_transfer", args: { amount: 1 }, expect: "MAYBE" }] }))
    expect(oneLine(await wk("policy", "test", bad), ExitCode.usage)).toBe(`wk: ${bad}: tests[0].expect: expected one of "ALLOW", "REQUIRE_WITNESS", "DENY", "REFUSED" or an object, got "MAYBE"`)
    const wrongType = join(dir, "wrong-type.json")
    writeFileSync(wrongType, JSON.stringify({ tests: [{ principal: 5, tool: "money_transfer", args: {}, expect: "ALLOW" }] }))
    expect(oneLine(await wk("policy", "test", wrongType), ExitCode.usage)).toBe(`wk: ${wrongType}: tests[0].principal: expected string, got 5`)
    const extra = join(dir, "extra.json")
    writeFileSync(extra, JSON.stringify({ tests: [{ principal: "agent:alice", tool: "t", args: {}, expect: "ALLOW", expected: "DENY" }] }))
    expect(oneLine(await wk("policy", "test", extra), ExitCode.usage)).toMatch(/: tests\[0\]\.expected: not allowed here \(expected: "name" \| "principal"/)
    const yaml = join(dir, "tests.yaml")
    writeFileSync(yaml, "tests:\n  - name: x\n    expect: ALLOW\n")
    expect(oneLine(await wk("policy", "test", yaml), ExitCode.usage)).toMatch(/^wk: .*tests\.yaml is not JSON \(.*\): write it as JSON, see docs\/cli\.md$/)
  }, 60_000)
})
