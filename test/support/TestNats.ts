import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { startNatsServer, type RunningNats } from "../../runtime/cli/EmbeddedNats.js"
import { defaultConfig } from "../../runtime/cli/Paths.js"
import { toolUserEntry } from "../../runtime/cli/NatsUsers.js"

/**
 * The tools the tests' echo tool services serve (test/support/EchoTool.ts and one-off answers):
 * the test tool service `tool-test-echo` may serve exactly these, as a real deployment's
 * `nats.conf` lists each service's tools. The demo bank's tools are `tool-demo-bank`'s.
 */
export const TestEchoTools = [
  "fs_read", "fs_write", "crm_update", "delete_file", "http_post", "deploy", "merge_pr",
  "vault_read", "vault_fail", "web_fetch", "inventory", "leaky_read",
  "fraud_check", "account_history", "ledger_scan",
  "no_readback_op", "transfer_vetoed", "transfer_plain",
  "quorum_op", "fallback_deny_op", "fallback_route_op",
  "two_humans_op", "human_op", "human_and_fraud_op", "carol_op",
  "bench_echo", "idempotent_op",
  // Upstream MCP tools as `wk mcp`'s tool bridge serves them (test/integrations/Mcp.test.ts).
  "fs_read_text_file", "fs_write_file", "fs_move_file", "web_echo"
] as const

/** Dev credentials of each role in nats.conf (and the test tool service the test config adds). */
export const Roles = {
  kernel: { user: "kernel", pass: "kernel-dev" },
  provisioner: { user: "provisioner", pass: "provisioner-dev" },
  /** Archiving: the only login that may purge WK_EVENTS. */
  retention: { user: "retention", pass: "retention-dev" },
  agent: { user: "agent", pass: "agent-dev" },
  witness: { user: "witness", pass: "witness-dev" },
  /** The shared tool login: it serves nothing (each tool service has its own user). */
  tool: { user: "tool", pass: "tool-dev" },
  /** The demo bank's own user: money_transfer and bank_balance only. */
  bank: { user: "tool-demo-bank", pass: "demo-bank-dev" },
  /** The tests' echo tool service: `TestEchoTools` only (added by the test config). */
  echo: { user: "tool-test-echo", pass: "test-echo-dev" },
  gateway: { user: "gateway", pass: "gateway-dev" },
  auditor: { user: "auditor", pass: "auditor-dev" },
  /** Agents confined to their own session namespace (`alice.*`, `bob.*`). */
  alice: { user: "agent-alice", pass: "alice-dev" },
  bob: { user: "agent-bob", pass: "bob-dev" }
} as const

/**
 * nats.conf as shipped plus the test tool service's user, written once per process: the tests
 * run against the real permission sets, with one more tool service of their own. `.ci/run`
 * starts its server from this file too (test/support/printTestNatsConfig.ts).
 */
export const testNatsConfig = (() => {
  let path: string | undefined
  return (): string => {
    if (path !== undefined) return path
    const shipped = readFileSync(defaultConfig, "utf8")
    const marker = "users: ["
    if (!shipped.includes(marker)) throw new Error(`${defaultConfig} has no '${marker}' list to add the test tool service to`)
    const entry = toolUserEntry("test-echo", TestEchoTools, Roles.echo.pass)
    path = join(mkdtempSync(join(tmpdir(), "wk-nats-conf-")), "nats.conf")
    writeFileSync(path, shipped.replace(marker, `${marker}\n    ${entry}`))
    return path
  }
})()

export interface TestNats extends RunningNats {
  readonly servers: string
  readonly storeDir: string
  /** Stops the server, keeping the store (a restart sees the same data). */
  readonly restart: () => Promise<TestNats>
  /** Stops the server and removes its store. */
  readonly dispose: () => Promise<void>
}

/** Starts a nats-server of our own from nats.conf (plus the test tool service), on a free port, with a temporary store. */
export const startTestNats = async (storeDir = mkdtempSync(join(tmpdir(), "wk-nats-")), port?: number): Promise<TestNats> => {
  const s = await startNatsServer({ config: testNatsConfig(), storeDir, ...(port ? { port } : {}) })
  const t: TestNats = {
    ...s,
    servers: `127.0.0.1:${s.port}`,
    storeDir,
    restart: async () => {
      await s.stop()
      return startTestNats(storeDir, s.port)
    },
    dispose: async () => {
      await s.stop()
      rmSync(storeDir, { recursive: true, force: true })
    }
  }
  return t
}
