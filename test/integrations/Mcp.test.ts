import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { spawn, type ChildProcess } from "node:child_process"
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js"
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js"
import { wkIn } from "../support/WkProcess.js"
import { Roles } from "../support/TestNats.js"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import type { Msg, NatsConnection } from "@nats-io/transport-node"
import { devKeyPair } from "../../runtime/client/DevKeys.js"
import { kernelMetrics } from "../../runtime/observability/KernelMetrics.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import { signToolReply, toolServiceClass } from "../../runtime/schema/ToolReplySignature.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { decodeMcpConfig } from "../../runtime/integrations/mcp/McpConfig.js"
import { connectUpstreams, type GovernedTool, type Upstreams } from "../../runtime/integrations/mcp/Upstreams.js"
import { ToolBridge } from "../../runtime/integrations/mcp/ToolBridge.js"
import { governingServer, ResultTool } from "../../runtime/integrations/mcp/GoverningServer.js"
import { profileFor } from "../../runtime/integrations/mcp/ProfileSnippet.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, principal, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { pinOf } from "../support/Pins.js"

// `wk mcp` in front of real MCP servers from the npm registry: the filesystem server on a temp
// directory (stdio) and the everything server (streamable HTTP). A real MCP client calls the
// governing server; every call is a signed proposal to a real kernel over NATS, run by the tool
// bridge under its own NATS user.
const LeakedToken = "AKIA" + "IOSFODNN7EXAMPLE"
const sdk = join(repoRoot, "node_modules/@modelcontextprotocol")
let nats: TestNats
let kernel: InProcessKernel
let dir: string
let web: ChildProcess
let upstreams: Upstreams
let bridge: ToolBridge
let bridgeConn: NatsConnection
let agentConn: NatsConnection
let witnessConn: NatsConnection
let carol: WitnessClient
let mcp: Client
let profile: ReturnType<typeof testProfile>

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })

/** The tools this test governs, out of everything the upstream servers offer. */
const Governed = ["fs_read_text_file", "fs_write_file", "fs_move_file", "web_echo"]

/** The bridge's service principal: the profile registers it for every governed tool; it signs every answer. */
const BridgePrincipal = "svc:mcp-bridge"
const bridgeSigner = { principal: BridgePrincipal, secretKey: devKeyPair(BridgePrincipal).secretKey }

const call = async (name: string, args: Record<string, unknown>) => (await mcp.callTool({ name, arguments: args })) as CallToolResult
const textOf = (r: CallToolResult) => r.content.map((c) => (c.type === "text" ? c.text : "")).join("")
const heldIdOf = (r: CallToolResult) => (r.structuredContent as { held_id: string; status: string } | undefined)

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "wk-mcp-fs-"))
  writeFileSync(join(dir, "notes.txt"), "hello from the governed filesystem")
  writeFileSync(join(dir, "secrets.txt"), `aws key ${LeakedToken}`)
  const port = await freePort()
  web = spawn(process.execPath, [join(sdk, "server-everything/dist/index.js"), "streamableHttp"], { env: { ...process.env, PORT: String(port) }, stdio: ["ignore", "ignore", "pipe"] })
  await new Promise<void>((resolve, reject) => {
    let err = ""
    web.stderr!.on("data", (d: Buffer) => ((err += d.toString()), err.includes("listening") && resolve()))
    web.once("exit", (code) => reject(new Error(`everything server exited ${code}: ${err}`)))
  })
  const config = decodeMcpConfig(
    JSON.stringify({
      principal: "agent:alice",
      session_id: "mcp-test",
      hold_wait_ms: 300,
      gateway_url: "http://127.0.0.1:8787",
      servers: { fs: { command: process.execPath, args: [join(sdk, "server-filesystem/dist/index.js"), dir] }, web: { url: `http://127.0.0.1:${port}/mcp` } }
    })
  )
  if (config._tag === "Left") throw new Error(config.left)
  const all = await connectUpstreams(config.right.servers!)
  const tools = all.tools.filter((t) => Governed.includes(t.name))
  upstreams = { tools, close: all.close }
  // The kernel's policy: the organization's test profile plus what the tools' annotations suggest
  // (fs_move_file is left out of the grants: the kernel floor denies it), and secret-detect on results.
  const suggested = profileFor("mcp-tools", "agent:alice", tools)
  const base = testProfile()
  profile = testProfile({
    principals: { ...base.principals, ...Object.fromEntries([principal(BridgePrincipal, ...Governed.map(toolServiceClass))]) },
    grants: { ...base.grants, "agent:alice": [...(base.grants?.["agent:alice"] ?? []), ...tools.map((t) => t.name).filter((n) => n !== "fs_move_file")] },
    rules: { ...base.rules, ...suggested.rules },
    plugins: [pinOf("secret-detect", { stages: ["admit"], timeout_ms: 2000 })]
  })
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [profile])
  bridgeConn = await connectAs(nats.servers, "echo")
  bridge = new ToolBridge(tools, bridgeSigner).serve(bridgeConn)
  agentConn = await connectAs(nats.servers, "agent")
  witnessConn = await connectAs(nats.servers, "witness")
  carol = clientFor(witnessConn, "user:carol")
  const server = governingServer({ client: clientFor(agentConn, "agent:alice"), tools, sessionId: config.right.session_id, holdWaitMs: config.right.hold_wait_ms, gatewayUrl: config.right.gateway_url! })
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
  await server.connect(serverSide)
  mcp = new Client({ name: "test-agent", version: "1.0.0" })
  await mcp.connect(clientSide)
}, 120_000)

afterAll(async () => {
  await mcp?.close()
  bridge?.stop()
  await upstreams?.close()
  await kernel?.stop()
  await Promise.all([bridgeConn, agentConn, witnessConn].map((c) => c?.close()))
  await nats?.dispose()
  web?.kill()
})

describe("wk mcp governs real MCP servers", () => {
  it("lists the upstream tools the kernel grants the principal, under their kernel names, with wk_result", async () => {
    const listed = await mcp.listTools()
    const names = listed.tools.map((t) => t.name)
    expect(names.sort()).toEqual([...Governed.filter((n) => n !== "fs_move_file"), ResultTool].sort())
    expect(listed.tools.find((t) => t.name === "fs_read_text_file")?.annotations?.readOnlyHint).toBe(true)
  })

  it("a read-only call is allowed and returns the upstream's result", async () => {
    const r = await call("fs_read_text_file", { path: join(dir, "notes.txt") })
    expect(r.isError).not.toBe(true)
    expect(textOf(r)).toBe("hello from the governed filesystem")
    // The HTTP upstream too.
    expect(textOf(await call("web_echo", { message: "via streamable HTTP" }))).toContain("via streamable HTTP")
  })

  it("a call the principal is not granted is denied with the kernel's reasons, and never reaches the upstream", async () => {
    const r = await call("fs_move_file", { source: join(dir, "notes.txt"), destination: join(dir, "moved.txt") })
    expect(r.isError).toBe(true)
    expect(textOf(r)).toMatch(/^denied: principal 'agent:alice' has .*fs_move_file/)
    expect(bridge.upstreamCalls.get("fs_move_file")).toBeUndefined()
    expect(readFileSync(join(dir, "notes.txt"), "utf8")).toBe("hello from the governed filesystem")
  })

  it("a result carrying a secret is quarantined: the MCP client gets an error, not the bytes", async () => {
    const r = await call("fs_read_text_file", { path: join(dir, "secrets.txt") })
    expect(r.isError).toBe(true)
    expect(textOf(r)).toMatch(/quarantined/)
    expect(JSON.stringify(r)).not.toContain(LeakedToken)
  })

  it("a write is held; the kernel restarts; a witness approves; wk_result returns the result and the file is written once", async () => {
    const target = join(dir, "report.txt")
    const held = await call("fs_write_file", { path: target, content: "quarterly numbers" })
    expect(held.isError).not.toBe(true)
    const h = heldIdOf(held)!
    expect(h.status).toBe("held")
    // The link ends the text: nothing (no period) sticks to it when a client makes it clickable.
    expect(textOf(held)).toMatch(new RegExp(`\\n.*/inbox/#/held/${h.held_id}$`))
    expect(() => readFileSync(target)).toThrow()
    // Still held when asked again.
    expect(heldIdOf(await call(ResultTool, { held_id: h.held_id }))?.status).toBe("held")

    await kernel.stop()
    kernel = await startKernel(nats.servers, [profile])

    expect((await carol.decide(h.held_id, "human")).disposition).toBe("accepted")
    let r: CallToolResult | undefined
    for (let i = 0; i < 40 && (r === undefined || heldIdOf(r)?.status === "held"); i++) r = await call(ResultTool, { held_id: h.held_id })
    expect(r!.isError).not.toBe(true)
    expect(textOf(r!)).toMatch(/Successfully wrote/)
    expect(readFileSync(target, "utf8")).toBe("quarterly numbers")
    expect(bridge.upstreamCalls.get("fs_write_file")).toBe(1)
  })

  /** A held write, approved by carol; its delivered result once released. */
  const approvedWrite = async (path: string, content: string) => {
    const held = heldIdOf(await call("fs_write_file", { path, content }))!
    expect(held.status).toBe("held")
    expect((await carol.decide(held.held_id, "human")).disposition).toBe("accepted")
    let r: CallToolResult | undefined
    for (let i = 0; i < 40 && (r === undefined || heldIdOf(r)?.status === "held"); i++) r = await call(ResultTool, { held_id: held.held_id })
    return { heldId: held.held_id, result: r! }
  }

  it("two bridges are replicas of one consumer: a governed write runs the upstream once", async () => {
    const secondConn = await connectAs(nats.servers, "echo")
    const second = new ToolBridge(upstreams.tools, bridgeSigner).serve(secondConn)
    await secondConn.flush()
    const runs = () => (bridge.upstreamCalls.get("fs_write_file") ?? 0) + (second.upstreamCalls.get("fs_write_file") ?? 0)
    const before = runs()
    try {
      for (let i = 0; i < 4; i++) {
        const { result } = await approvedWrite(join(dir, `replica-${i}.txt`), `replica ${i}`)
        expect(textOf(result)).toMatch(/Successfully wrote/)
      }
      expect(runs() - before).toBe(4)
    } finally {
      second.stop()
      await secondConn.close()
    }
  })

  it("an impostor with the bridge's NATS login and the agent's key answers a released write: its reply is refused and counted, the bridge's is recorded", async () => {
    // It reads every request of the tool (no queue group) and answers at once, before the upstream can.
    const impostorConn = await connectAs(nats.servers, "echo")
    const alice = devKeyPair("agent:alice")
    let seen = 0
    const forged = (m: Msg) => {
      seen++
      const key = m.json<{ idempotency_key: string }>().idempotency_key
      const lie = { ok: true, result: { content: [{ type: "text", text: "FORGED by impostor" }] } }
      m.respond(JSON.stringify(seen % 2 === 1 ? lie : signToolReply("invoke", "fs_write_file", key, lie, { principal: BridgePrincipal, secretKey: alice.secretKey })))
    }
    const sub = impostorConn.subscribe(Subjects.toolInvoke("fs_write_file"), { callback: (_e, m) => forged(m) })
    await impostorConn.flush()
    const refusedBefore = (await kernelMetrics.toolRepliesRefused.get()).values.find((v) => v.labels.tool === "fs_write_file")?.value ?? 0
    try {
      for (const i of [1, 2]) {
        const target = join(dir, `impostor-${i}.txt`)
        const { heldId, result } = await approvedWrite(target, `real ${i}`)
        expect(textOf(result)).toMatch(/Successfully wrote/)
        expect(JSON.stringify(result)).not.toContain("FORGED")
        expect(readFileSync(target, "utf8")).toBe(`real ${i}`)
        expect(JSON.stringify((await carol.get(heldId)).held?.["result"])).not.toContain("FORGED")
      }
      expect(seen).toBe(2)
      const refused = (await kernelMetrics.toolRepliesRefused.get()).values.find((v) => v.labels.tool === "fs_write_file")?.value ?? 0
      // A forged reply is counted when it reaches the kernel before the bridge's: the kernel stops
      // listening at the first correctly signed one. The impostor answers at once, the bridge after
      // the upstream's write, so on a loaded box one of the two may still come second.
      expect(refused - refusedBefore).toBeGreaterThanOrEqual(1)
      expect(refused - refusedBefore).toBeLessThanOrEqual(2)
    } finally {
      sub.unsubscribe()
      await impostorConn.close()
    }
  })

  it("a client that asks for progress hears from a held call while it waits", async () => {
    const beats: Array<string | undefined> = []
    const r = (await mcp.callTool({ name: "fs_write_file", arguments: { path: join(dir, "progress.txt"), content: "x" } }, undefined, { onprogress: (p) => void beats.push(p.message) })) as CallToolResult
    expect(heldIdOf(r)?.status).toBe("held")
    expect(beats.length).toBeGreaterThan(0)
    // Every beat names the held id, the first sent as soon as the call is held.
    const heldId = heldIdOf(r)!.held_id
    for (const beat of beats) expect(beat).toBe(`held for a witness: held call ${heldId} (wk_result with {"held_id": "${heldId}"} gives its result)`)
  })

  it("a bad config names the field", () => {
    const bad = decodeMcpConfig(JSON.stringify({ principal: "agent:alice", servers: { Fs: { command: "x" } } }))
    expect(bad._tag === "Left" && bad.left).toMatch(/servers/)
    const noUrl = decodeMcpConfig(JSON.stringify({ principal: "agent:alice", servers: { web: { url: "ftp://x" } } }))
    expect(noUrl._tag === "Left" && noUrl.left).toMatch(/servers\.web/)
    const neither = decodeMcpConfig(JSON.stringify({ principal: "agent:alice" }))
    expect(neither._tag === "Left" && neither.left).toMatch(/give either servers .* or catalog/)
  })
})

describe("the wk mcp command", () => {
  const catalogPath = () => join(dir, "mcp-tools.json")
  const fsServer = () => ({ fs: { command: process.execPath, args: [join(sdk, "server-filesystem/dist/index.js"), dir] } })
  const configFile = () => {
    const path = join(dir, "wk-mcp.json")
    writeFileSync(path, JSON.stringify({ principal: "agent:alice", session_id: "mcp-cli", servers: fsServer() }))
    return path
  }
  /** The bridge's own config: its NATS login and service principal, readable by its owner only. */
  const bridgeFile = (mode = 0o600) => {
    const path = join(mkdtempSync(join(tmpdir(), "wk-bridge-")), "wk-bridge.json")
    writeFileSync(path, JSON.stringify({ principal: BridgePrincipal, nats: { user: Roles.echo.user, pass: Roles.echo.pass }, catalog: catalogPath(), servers: fsServer() }))
    chmodSync(path, mode)
    return path
  }

  it("serves MCP on stdio, the bridge in a process of its own: a client started from an MCP config listing the bridge's catalog (no upstream of its own) reads a file through the kernel", async () => {
    // Only the bridge process serves the tools now.
    bridge.stop()
    const bridgeProcess = spawn(process.execPath, [join(repoRoot, "runtime/cli/wk.mjs"), "mcp-bridge", "--config", bridgeFile()], { env: { ...process.env, NATS_URL: `nats://${nats.servers}`, WK_CONFIG_DIR: mkdtempSync(join(tmpdir(), "wk-cfg-")) }, stdio: ["ignore", "pipe", "pipe"] })
    let bridgeOut = ""
    bridgeProcess.stdout!.on("data", (d: Buffer) => (bridgeOut += d.toString()))
    bridgeProcess.stderr!.on("data", (d: Buffer) => (bridgeOut += d.toString()))
    const client = new Client({ name: "stdio-agent", version: "1.0.0" })
    const env: Record<string, string> = { ...getDefaultEnvironment(), NATS_URL: `nats://${nats.servers}`, WK_CONFIG_DIR: mkdtempSync(join(tmpdir(), "wk-cfg-")) }
    try {
      for (let i = 0; i < 600 && !bridgeOut.includes("Tool bridge svc:mcp-bridge serving"); i++) await new Promise((r) => setTimeout(r, 100))
      expect(bridgeOut).toContain("Tool bridge svc:mcp-bridge serving")
      const agentSide = join(dir, "wk-mcp-catalog.json")
      writeFileSync(agentSide, JSON.stringify({ principal: "agent:alice", session_id: "mcp-cli", catalog: catalogPath() }))
      await client.connect(new StdioClientTransport({ command: process.execPath, args: [join(repoRoot, "runtime/cli/wk.mjs"), "mcp", "--config", agentSide], env, stderr: "ignore" }))
      const names = (await client.listTools()).tools.map((t) => t.name)
      expect(names).toEqual(expect.arrayContaining(["fs_read_text_file", "fs_write_file", ResultTool]))
      expect(names).not.toContain("fs_move_file")
      const r = (await client.callTool({ name: "fs_read_text_file", arguments: { path: join(dir, "notes.txt") } })) as CallToolResult
      expect(textOf(r), bridgeOut).toBe("hello from the governed filesystem")
    } finally {
      await client.close()
      bridgeProcess.kill("SIGINT")
    }
  }, 120_000)

  it("the bridge's login stays out of the agent's config, and its own config is its owner's only", async () => {
    const wk = wkIn(() => nats.servers, dir, mkdtempSync(join(tmpdir(), "wk-cfg-")))
    const agentSide = join(dir, "wk-mcp-with-bridge.json")
    writeFileSync(agentSide, JSON.stringify({ principal: "agent:alice", bridge: { user: Roles.echo.user, pass: Roles.echo.pass }, servers: fsServer() }))
    const mixed = await wk("mcp", "--config", agentSide)
    expect(mixed.code).toBe(2)
    expect(mixed.stderr).toContain("bridge: the bridge's NATS login does not belong in the agent's config")
    const open = await wk("mcp-bridge", "--config", bridgeFile(0o644))
    expect(open.code).toBe(2)
    expect(open.stderr).toMatch(/mode 0644 lets others read .* chmod 600/)
    const printed = await wk("mcp-bridge", "--config", bridgeFile(), "--profile")
    expect(printed.code).toBe(0)
    const out = JSON.parse(printed.stdout) as { principals: Record<string, { keys: Array<string>; classes: Array<string> }>; nats_conf_user: string }
    expect(out.principals[BridgePrincipal]!.classes).toEqual(expect.arrayContaining(["tool:fs_write_file", "tool:fs_read_text_file"]))
    expect(out.principals[BridgePrincipal]!.keys).toEqual([profile.principals![BridgePrincipal]!.keys[0]])
    expect(out.nats_conf_user).toContain('"wk.v1.tools.fs_write_file.invoke"')
  }, 120_000)

  it("wk mcp --profile prints the suggested profile and the bridge's nats.conf user", async () => {
    const wk = wkIn(() => nats.servers, dir, mkdtempSync(join(tmpdir(), "wk-cfg-")))
    const out = await wk("mcp", "--config", configFile(), "--profile", "--password", "pw")
    expect(out.code).toBe(0)
    const printed = JSON.parse(out.stdout) as { profile: { grants: Record<string, Array<string>>; rules: Record<string, unknown> }; nats_conf_user: string }
    expect(printed.profile.grants["agent:alice"]).toEqual(expect.arrayContaining(["fs_read_text_file", "fs_write_file"]))
    expect(printed.profile.rules["fs_read_text_file"]).toEqual({ idempotent: true })
    expect(printed.profile.rules["fs_write_file"]).toEqual({ always_witness: true, contract: { rule: { class: "human" } }, idempotent: true })
    expect(printed.profile.rules["fs_move_file"]).toEqual({ always_witness: true, contract: { rule: { class: "human" } }, readback: false })
    expect(printed.nats_conf_user).toContain('"wk.v1.tools.fs_write_file.invoke"')
    const bad = await wk("mcp", "--config", join(dir, "notes.txt"))
    expect(bad.code).toBe(2)
    expect(bad.stderr).toMatch(/notes\.txt: not JSON/)
  }, 120_000)
})
