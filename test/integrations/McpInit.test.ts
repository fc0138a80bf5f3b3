import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { execFile } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { connect, errors, type NatsConnection } from "@nats-io/transport-node"
import { startNatsServer, type RunningNats } from "../../runtime/cli/EmbeddedNats.js"
import { composeServerConfig, serverStoreDir } from "../../runtime/cli/LocalNatsUsers.js"
import { defaultConfig, repoRoot } from "../../runtime/cli/Paths.js"
import { StoreLockFile } from "../../runtime/cli/StoreLock.js"
import { loadBridgeConfig } from "../../runtime/integrations/mcp/McpConfig.js"
import { eventually } from "../support/Stream.js"

// `wk mcp init` as a newcomer runs it: one command against a running `wk start` store writes the
// MCP client's config, the bridge's config, key and NATS login, and the suggested profile; the
// store's nats-server serves the bridge's login at once (reloaded, not restarted), nats.conf is
// untouched, and the one password exists only where it was generated. The attacker's side: that
// login may only serve these tools, and the agent's files hold none of the bridge's secrets.
const run = promisify(execFile)
const sdk = join(repoRoot, "node_modules", "@modelcontextprotocol")
let home: string
let dataDir: string
let server: RunningNats
const shippedConf = readFileSync(defaultConfig, "utf8")

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "wk-mcp-init-"))
  dataDir = join(home, "data")
  mkdirSync(join(home, "files"))
  writeFileSync(join(home, "files", "notes.txt"), "hello")
  // The store as `wk start` runs it: its server from the composed config, its pid in the lock.
  server = await startNatsServer({ config: composeServerConfig(dataDir), storeDir: serverStoreDir(dataDir), storeDirInConfig: true })
  writeFileSync(join(dataDir, StoreLockFile), JSON.stringify({ pid: process.pid, started_at: new Date().toISOString(), nats_pid: server.pid, nats_url: server.url }))
}, 60_000)
afterAll(async () => {
  await server?.stop()
  rmSync(home, { recursive: true, force: true })
})

const wk = async (...args: Array<string>) => {
  const env: Record<string, string | undefined> = { ...process.env, WK_DATA_DIR: dataDir, NATS_URL: server.url }
  delete env["WK_CONTEXT"]
  try {
    const r = await run(process.execPath, [join(repoRoot, "runtime", "cli", "wk.mjs"), ...args], { cwd: home, env, timeout: 90_000 })
    return { code: 0, stdout: r.stdout, stderr: r.stderr }
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string }
    return { code: x.code, stdout: x.stdout, stderr: x.stderr }
  }
}

const json = (path: string) => JSON.parse(readFileSync(path, "utf8")) as Record<string, any>
const out = () => join(home, "wk-mcp")

/** Connects as the bridge with the login init wrote, collecting the permission violations the server reports. */
const asBridge = async (pass: string) => {
  const nc = await connect({ servers: server.url.replace(/^nats:\/\//, ""), user: "tool-mcp", pass, reconnect: false })
  const refused: Array<{ operation: string; subject: string }> = []
  void (async () => {
    for await (const s of nc.status()) if (s.type === "error" && s.error instanceof errors.PermissionViolationError) refused.push({ operation: s.error.operation, subject: s.error.subject })
  })()
  return { nc, refused }
}

describe("wk mcp init", () => {
  let bridgeConn: NatsConnection | undefined
  afterAll(async () => bridgeConn?.close())

  it("writes the client config, the bridge's config, key and login, the catalog and the suggested profile in one step", async () => {
    const r = await wk("mcp", "init", "--upstream", `fs=${process.execPath} ${join(sdk, "server-filesystem/dist/index.js")} ${join(home, "files")}`)
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toContain(`nats-server (pid ${server.pid}) reloaded`)
    const bridge = json(join(out(), "wk-bridge.json"))
    const agent = json(join(out(), "wk-mcp.json"))
    const profile = json(join(out(), "profile.json"))
    const client = json(join(out(), "mcp-client.json"))
    // The client runs wk mcp with the agent's config; the agent lists tools from the catalog.
    expect(client.mcpServers.wk.args.slice(-3)).toEqual(["mcp", "--config", join(out(), "wk-mcp.json")])
    expect(agent).toMatchObject({ principal: "agent:alice", catalog: join(out(), "mcp-tools.json") })
    expect(json(join(out(), "mcp-tools.json")).tools.map((t: { name: string }) => t.name)).toContain("fs_read_text_file")
    // The bridge's config is one wk mcp-bridge accepts (0600 included), and so is its key's.
    expect(loadBridgeConfig(join(out(), "wk-bridge.json"))._tag).toBe("Right")
    for (const f of ["wk-bridge.json", "bridge.key.json"]) expect(statSync(join(out(), f)).mode & 0o777).toBe(0o600)
    // The profile grants the tools, asks a person for any tool not declared read-only, and registers the bridge's new key for each tool.
    expect(profile.grants["agent:alice"]).toContain("fs_write_file")
    expect(profile.rules["fs_read_text_file"]).toEqual({ idempotent: true })
    expect(profile.rules["fs_write_file"]).toMatchObject({ always_witness: true, contract: { rule: { class: "human" } } })
    expect(profile.principals["svc:mcp-bridge"]).toEqual({ keys: [json(join(out(), "bridge.key.json")).public_key], classes: expect.arrayContaining(["tool:fs_write_file", "tool:fs_read_text_file"]) })
    // No nats.conf edit: the login is a local user of this store, with the password the bridge's config holds.
    expect(readFileSync(defaultConfig, "utf8")).toBe(shippedConf)
    const local = readFileSync(join(dataDir, "nats-users", "tool-mcp.conf"), "utf8")
    expect(local).toContain(`password: ${bridge.nats.pass}`)
    expect(statSync(join(dataDir, "nats-users", "tool-mcp.conf")).mode & 0o777).toBe(0o600)
  }, 120_000)

  it("the running server accepts the bridge's login at once (no restart), for its own tools' subjects only", async () => {
    const bridge = json(join(out(), "wk-bridge.json"))
    // The server applies a reload on its own time: the login is accepted once it has.
    const { nc, refused } = await eventually(() => asBridge(bridge.nats.pass).catch(() => null), 10_000, 100)
    bridgeConn = nc
    nc.subscribe("wk.v1.tools.fs_write_file.invoke")
    nc.subscribe("wk.v1.tools.money_transfer.invoke")
    nc.subscribe("wk.v1.calls.>")
    nc.publish("wk.v1.calls.propose", "{}")
    await nc.flush()
    await eventually(async () => (refused.length >= 3 ? true : null), 5000, 20)
    expect(refused).toEqual(expect.arrayContaining([
      { operation: "subscription", subject: "wk.v1.tools.money_transfer.invoke" },
      { operation: "subscription", subject: "wk.v1.calls.>" },
      { operation: "publish", subject: "wk.v1.calls.propose" }
    ]))
    expect(refused.map((x) => x.subject)).not.toContain("wk.v1.tools.fs_write_file.invoke")
  }, 60_000)

  it("the agent's files hold none of the bridge's secrets, and a wrong password is refused", async () => {
    const bridge = json(join(out(), "wk-bridge.json"))
    const key = json(join(out(), "bridge.key.json"))
    for (const f of ["wk-mcp.json", "mcp-client.json", "mcp-tools.json", "profile.json"]) {
      const text = readFileSync(join(out(), f), "utf8")
      expect(text).not.toContain(bridge.nats.pass)
      expect(text).not.toContain(key.secret_key)
    }
    await expect(connect({ servers: server.url.replace(/^nats:\/\//, ""), user: "tool-mcp", pass: "tool-mcp-dev", reconnect: false })).rejects.toThrow(/Authorization/i)
  }, 60_000)

  it("a second init does not overwrite the first without --force; a bad upstream is a usage error in one line", async () => {
    const again = await wk("mcp", "init", "--upstream", `fs=${process.execPath} x`)
    expect(again.code).toBe(2)
    expect(again.stderr.trim().split("\n")).toHaveLength(1)
    expect(again.stderr).toMatch(/exists: pass --force/)
    const bad = await wk("mcp", "init", "--upstream", "no-equals-sign", "--out", join(home, "other"))
    expect(bad.code).toBe(2)
    expect(bad.stderr).toMatch(/^wk: --upstream 'no-equals-sign': expected NAME=COMMAND ARGS\.\.\. or NAME=URL\n$/)
  }, 60_000)
})
