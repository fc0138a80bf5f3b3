import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createServer } from "node:net"
import { spawn } from "node:child_process"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { writeCatalog } from "../../runtime/integrations/mcp/ToolCatalog.js"
import { applyPolicyWitnessed } from "../support/PolicyChange.js"
import { SignJWT, exportJWK, generateKeyPair } from "jose"
import { Either } from "effect"
import { parseTrustRoot, type TrustRoot } from "../../runtime/audit/TrustRoot.js"
import { checkOf, replayAs, trustRootFor } from "../audit/support.js"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { ClientCredentialsProvider } from "@modelcontextprotocol/sdk/client/auth-extensions.js"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import type { NatsConnection } from "@nats-io/transport-node"
import { devKeyPair } from "../../runtime/client/DevKeys.js"
import { WitnessClient, type ProposeReply } from "../../runtime/client/Client.js"
import type { IdentityBinding } from "../../runtime/schema/IdentityBinding.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { toolServiceClass } from "../../runtime/schema/ToolReplySignature.js"
import { ToolBridge } from "../../runtime/integrations/mcp/ToolBridge.js"
import { ResultTool } from "../../runtime/integrations/mcp/GoverningServer.js"
import { hintsOf, type GovernedTool } from "../../runtime/integrations/mcp/Upstreams.js"
import { startHttpEndpoint, type HttpEndpoint } from "../../runtime/integrations/mcp/HttpEndpoint.js"
import { TokenVerifier } from "../../runtime/integrations/mcp/TokenVerifier.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, principal, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { startOidcIssuer, type OidcClient, type OidcIssuer } from "../support/OidcIssuer.js"
import { eventually } from "../support/Stream.js"
import { jetstreamManager } from "@nats-io/jetstream"
import { Streams, Subjects } from "../../runtime/schema/Subjects.js"
import { eventsOfMessage } from "../../runtime/schema/Commit.js"

// `wk mcp serve --http` as an OAuth 2.1 protected resource in front of a real kernel, with a real
// authorization server (oidc-provider) issuing the tokens and the MCP SDK's own client, with its
// OAuth support, connecting. Each agent is its own principal, whose key the endpoint holds.
const Alice: OidcClient = { id: "alice-agent", secret: "alice-secret-0123456789" }
const Bob: OidcClient = { id: "bob-agent", secret: "bob-secret-0123456789" }
const CiBot: OidcClient = { id: "ci-runner-7", secret: "ci-secret-0123456789", groups: ["ci"] }
const Stranger: OidcClient = { id: "stranger", secret: "stranger-secret-0123456789" }
/** Alice's short-lived client: its tokens expire after a few seconds. */
const Brief: OidcClient = { id: "alice-brief", secret: "brief-secret-0123456789", ttl: 4 }

const BridgePrincipal = "svc:mcp-bridge"
const Tools = ["fs_read", "fs_write"]

let nats: TestNats
let kernel: InProcessKernel
let idp: OidcIssuer
let endpoint: HttpEndpoint
let resource: URL
let profile: Profile
let bridge: ToolBridge
let bridgeConn: NatsConnection
let agentConn: NatsConnection
let witnessConn: NatsConnection
const writes: Array<unknown> = []
const opened: Array<Client> = []

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })

const governed = (name: string, readOnly: boolean, call: GovernedTool["call"]): GovernedTool => {
  const annotations = readOnly ? { readOnlyHint: true } : { destructiveHint: true }
  return { name, server: "fs", upstreamName: name.slice(3), description: `${name} of the test upstream`, inputSchema: { type: "object" }, annotations, hints: hintsOf(annotations), call }
}
const upstream: ReadonlyArray<GovernedTool> = [
  governed("fs_read", true, async (args) => ({ content: [{ type: "text", text: `read ${String(args["path"])}` }] })),
  governed("fs_write", false, async (args) => (writes.push(args), { content: [{ type: "text", text: `wrote ${String(args["path"])}` }] }))
]

/** The official MCP client, authenticating with client credentials at the issuer the endpoint's metadata names. */
const connectClient = async (who: OidcClient): Promise<Client> => {
  const client = new Client({ name: `test ${who.id}`, version: "1.0.0" })
  const authProvider = new ClientCredentialsProvider({ clientId: who.id, clientSecret: who.secret, expectedIssuer: idp.issuer, scope: "mcp" })
  await client.connect(new StreamableHTTPClientTransport(endpoint.url, { authProvider }))
  opened.push(client)
  return client
}

const messageOf = (r: ProposeReply) => ("error" in r && typeof r.error === "object" ? r.error.message : JSON.stringify(r))
const textOf = (r: CallToolResult) => r.content.map((c) => (c.type === "text" ? c.text : "")).join("")
const call = async (c: Client, name: string, args: Record<string, unknown>) => (await c.callTool({ name, arguments: args })) as CallToolResult

/** A raw JSON-RPC POST to the endpoint with `token` (an initialize unless `body` says otherwise). */
const post = (token: string | undefined, body: unknown = initialize, headers: Record<string, string> = {}) =>
  fetch(endpoint.url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}), ...headers },
    body: JSON.stringify(body)
  })
const initialize = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } } }

beforeAll(async () => {
  idp = await startOidcIssuer([Alice, Bob, CiBot, Stranger, Brief])
  resource = new URL(`http://127.0.0.1:${await freePort()}/mcp`)
  const audience = resource.href
  const identities: ReadonlyArray<IdentityBinding> = [
    { issuer: idp.issuer, audience, subject: Alice.id, principal: "agent:alice" },
    { issuer: idp.issuer, audience, subject: Brief.id, principal: "agent:alice" },
    { issuer: idp.issuer, audience, subject: Bob.id, principal: "agent:bob" },
    { issuer: idp.issuer, audience, group: "ci", principal: "agent:ci" }
  ]
  const base = testProfile()
  profile = testProfile({
    principals: { ...base.principals, ...Object.fromEntries([principal("agent:ci", "agent"), principal(BridgePrincipal, ...Tools.map(toolServiceClass))]) },
    grants: { ...base.grants, "agent:alice": ["fs_read", "fs_write"], "agent:bob": ["fs_read"], "agent:ci": ["fs_read"] },
    rules: { ...base.rules, fs_read: { idempotent: true }, fs_write: { always_witness: true, readback: false, contract: { rule: { class: "human" } } } },
    identities: [...identities]
  })
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [profile])
  bridgeConn = await connectAs(nats.servers, "echo")
  bridge = new ToolBridge(upstream, { principal: BridgePrincipal, secretKey: devKeyPair(BridgePrincipal).secretKey }).serve(bridgeConn)
  agentConn = await connectAs(nats.servers, "agent")
  witnessConn = await connectAs(nats.servers, "witness")
  const held = (p: string) => [p, { client: WitnessClient.over(agentConn, { principal: p, secretKey: devKeyPair(p).secretKey }), sessionId: `mcp-${p.replace(/[^A-Za-z0-9_-]/g, "_")}` }] as const
  endpoint = await startHttpEndpoint(
    {
      resource,
      authorizationServers: [idp.issuer],
      verifier: new TokenVerifier([{ issuer: idp.issuer }], audience),
      // The endpoint's copy of the bindings stays as it started: the kernel decides with the ones in force.
      bindings: () => identities,
      principals: new Map([held("agent:alice"), held("agent:bob"), held("agent:ci")]),
      tools: upstream,
      holdWaitMs: 200,
      scopes: ["mcp"]
    },
    { host: "127.0.0.1", port: Number(resource.port) }
  )
}, 120_000)

afterAll(async () => {
  await Promise.all(opened.map((c) => c.close().catch(() => undefined)))
  await endpoint?.close()
  bridge?.stop()
  await kernel?.stop()
  await Promise.all([bridgeConn, agentConn, witnessConn].map((c) => c?.close()))
  await nats?.dispose()
  await idp?.close()
})

describe("wk mcp serve --http: an OAuth 2.1 protected resource", () => {
  it("serves its protected-resource metadata and answers a request without a token 401 with a challenge naming it", async () => {
    const meta = (await (await fetch(new URL("/.well-known/oauth-protected-resource/mcp", resource))).json()) as { resource: string; authorization_servers: Array<string> }
    expect(meta).toMatchObject({ resource: resource.href, authorization_servers: [idp.issuer] })
    const r = await post(undefined)
    expect(r.status).toBe(401)
    expect(r.headers.get("www-authenticate")).toBe(`Bearer resource_metadata="${new URL("/.well-known/oauth-protected-resource/mcp", resource).href}"`)
  })

  it("the MCP SDK's client gets a token from the issuer, lists the tools its principal is granted and calls one; the record names the token's issuer and subject", async () => {
    const alice = await connectClient(Alice)
    expect((await alice.listTools()).tools.map((t) => t.name).sort()).toEqual(["fs_read", "fs_write", ResultTool])
    const r = await call(alice, "fs_read", { path: "/srv/notes.txt" })
    expect(r.isError).not.toBe(true)
    expect(textOf(r)).toBe("read /srv/notes.txt")
    const [proposed] = await proposedPayloads("fs_read")
    expect(proposed?.["principal"]).toBe("agent:alice")
    expect(proposed?.["on_behalf_of"]).toMatchObject({ issuer: idp.issuer, subject: Alice.id })
    // Bob is his own principal: his grants, not Alice's.
    const bob = await connectClient(Bob)
    expect((await bob.listTools()).tools.map((t) => t.name).sort()).toEqual(["fs_read", ResultTool])
    expect(endpoint.sessions().map((s) => s.principal).sort()).toEqual(expect.arrayContaining(["agent:alice", "agent:bob"]))
  })

  it("a group binding: a client in group ci acts as agent:ci", async () => {
    const ci = await connectClient(CiBot)
    expect(textOf(await call(ci, "fs_read", { path: "/srv/build.log" }))).toBe("read /srv/build.log")
    expect(endpoint.sessions().some((s) => s.principal === "agent:ci" && s.subject === CiBot.id)).toBe(true)
  })

  it("the audit re-verifies the token behind each proposal against the issuer's keys the trust root names; another key for the issuer, or none, is a violation", async () => {
    const alice = await connectClient(Alice)
    expect((await call(alice, "fs_read", { path: "/srv/audited.txt" })).isError).not.toBe(true)
    const discovery = (await (await fetch(new URL(`${idp.issuer.replace(/\/$/, "")}/.well-known/openid-configuration`))).json()) as { jwks_uri: string }
    const jwks = (await (await fetch(discovery.jwks_uri)).json()) as { keys: Array<{ kty: string }> }
    const root = (issuers?: TrustRoot["issuers"]): TrustRoot => ({ ...trustRootFor([profile]), ...(issuers !== undefined ? { issuers } : {}) })
    // Each root as the auditor reads it from its file.
    const bearer = async (root: TrustRoot) => checkOf(await replayAs(nats.servers, "auditor", { factsBucket: null, sessionsStream: null, trust: Either.getOrThrow(parseTrustRoot(JSON.stringify(root))) }), "bearer-tokens")
    const held = await bearer(root({ [idp.issuer]: jwks }))
    expect(held).toMatchObject({ status: "passed", violations: [], unverified: [] })
    expect(held.checked).toBeGreaterThanOrEqual(1)
    // A forged root: the issuer's URL with another key. Every proposal on behalf of a token is named.
    const other = { ...(await exportJWK((await generateKeyPair("ES256")).publicKey)), kty: "EC", alg: "ES256", kid: "test-es256" }
    const forged = await bearer(root({ [idp.issuer]: { keys: [other] } }))
    expect(forged.status).toBe("failed")
    expect(forged.violations.length).toBe(held.checked)
    expect(forged.violations[0]?.message).toMatch(/does not verify against the trust root's keys/)
    const unrooted = await bearer(root())
    expect(unrooted.violations.length).toBe(held.checked)
    expect(unrooted.violations[0]?.message).toMatch(/unverifiable: the trust root names no keys for issuer/)
  })

  it("refuses a token issued for another audience", async () => {
    const { access_token } = await idp.token(Alice, "https://other.example.com/mcp")
    const r = await post(access_token)
    expect(r.status).toBe(401)
    expect(r.headers.get("www-authenticate")).toMatch(/^Bearer error="invalid_token", error_description="the token is not for this resource/)
  })

  it("refuses an expired token", async () => {
    const { access_token } = await idp.token(Brief, resource.href)
    const exp = JSON.parse(Buffer.from(access_token.split(".")[1]!, "base64url").toString()).exp as number
    await eventually(async () => Date.now() > exp * 1000 + 1000)
    const r = await post(access_token)
    expect(r.status).toBe(401)
    expect(r.headers.get("www-authenticate")).toContain('error_description="the token has expired"')
  })

  it("refuses a forged token: the issuer's claims and key id, signed with another key", async () => {
    const { access_token } = await idp.token(Alice, resource.href)
    const [header, payload] = access_token.split(".").slice(0, 2).map((p) => JSON.parse(Buffer.from(p, "base64url").toString()) as Record<string, unknown>)
    const { privateKey } = await generateKeyPair("ES256")
    const forged = await new SignJWT(payload!).setProtectedHeader({ alg: "ES256", typ: String(header!["typ"]), kid: String(header!["kid"]) }).sign(privateKey)
    const r = await post(forged)
    expect(r.status).toBe(401)
    expect(r.headers.get("www-authenticate")).toContain("signature does not verify")
    // An unsigned token ("alg": "none") is no better.
    const none = `${Buffer.from(JSON.stringify({ alg: "none" })).toString("base64url")}.${access_token.split(".")[1]}.`
    expect((await post(none)).status).toBe(401)
  })

  it("refuses a client posing as another subject: Bob's token on Alice's session, and Alice's key with Bob's token at the kernel", async () => {
    const aliceToken = (await idp.token(Alice, resource.href)).access_token
    const bobToken = (await idp.token(Bob, resource.href)).access_token
    const opened = await post(aliceToken)
    const sessionId = opened.headers.get("mcp-session-id")!
    expect(sessionId).toBeTruthy()
    const list = { jsonrpc: "2.0", id: 2, method: "tools/list", params: {} }
    const r = await post(bobToken, list, { "mcp-session-id": sessionId, "mcp-protocol-version": "2025-06-18" })
    expect(r.status).toBe(403)
    expect(((await r.json()) as { error_description: string }).error_description).toContain("belongs to another subject")
    // Whoever holds Alice's key still cannot make Bob's token act as Alice: the kernel checks the bindings in force.
    const asAlice = clientFor(agentConn, "agent:alice")
    const posing = await asAlice.propose({ session_id: "mcp-agent_alice", turn_id: "t", call_id: "posing1", tool: "fs_read", args: { path: "/x" }, on_behalf_of: { issuer: idp.issuer, subject: Bob.id, token: bobToken } })
    expect(posing.status).toBe(403)
    expect(messageOf(posing)).toContain(`no identity binding in force maps ${idp.issuer} '${Bob.id}' to agent:alice`)
    // Naming Alice while carrying Bob's token is caught too, and so is a bound principal proposing for no token.
    const renamed = await asAlice.propose({ session_id: "mcp-agent_alice", turn_id: "t", call_id: "posing2", tool: "fs_read", args: { path: "/x" }, on_behalf_of: { issuer: idp.issuer, subject: Alice.id, token: bobToken } })
    expect(messageOf(renamed)).toContain("the token's issuer and subject are")
    const bare = await asAlice.propose({ session_id: "mcp-agent_alice", turn_id: "t", call_id: "posing3", tool: "fs_read", args: { path: "/x" } })
    expect(messageOf(bare)).toContain("agent:alice is bound to bearer tokens")
  })

  it("refuses a verified token no binding maps to a principal", async () => {
    const r = await post((await idp.token(Stranger, resource.href)).access_token)
    expect(r.status).toBe(403)
    expect(((await r.json()) as { error_description: string }).error_description).toContain(`no identity binding maps ${idp.issuer} 'stranger'`)
  })
})

describe("revocation", () => {
  it("an expired token stops the next call on its session at once; the held call stays held, and its result reaches a session of the same principal only", async () => {
    // Alice's short-lived client opens a session and proposes a write, which is held.
    const { access_token } = await idp.token(Brief, resource.href)
    const opened = await post(access_token)
    const session = { "mcp-session-id": opened.headers.get("mcp-session-id")!, "mcp-protocol-version": "2025-06-18" }
    expect((await post(access_token, { jsonrpc: "2.0", method: "notifications/initialized" }, session)).status).toBe(202)
    const write = { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "fs_write", arguments: { path: "/srv/out.txt", content: "x" } } }
    const held = await post(access_token, write, { ...session, accept: "application/json, text/event-stream" })
    const heldId = /"held_id":"(h_[0-9a-f]{32})"/.exec(await held.text())?.[1]
    expect(heldId).toBeDefined()
    // The token expires: the same request on the same session is refused before it reaches the kernel.
    const exp = JSON.parse(Buffer.from(access_token.split(".")[1]!, "base64url").toString()).exp as number
    await eventually(async () => Date.now() > exp * 1000 + 1000)
    const refused = await post(access_token, { ...write, id: 4 }, session)
    expect(refused.status).toBe(401)
    const carol = clientFor(witnessConn, "user:carol")
    expect((await carol.get(heldId!)).held?.["lifecycle"]).toBe("open")
    expect(writes).toHaveLength(0)
    // A witness approves: the write runs once.
    expect((await carol.decide(heldId!, "human")).disposition).toBe("accepted")
    await eventually(async () => writes.length === 1)
    // Bob asks for Alice's result: his principal's session never receives it.
    const bob = await connectClient(Bob)
    const asBob = await call(bob, ResultTool, { held_id: heldId })
    expect(asBob.structuredContent).toMatchObject({ status: "held" })
    expect(textOf(asBob)).not.toContain("wrote")
    // Alice, in a new session with a fresh token, gets it.
    const alice = await connectClient(Alice)
    expect(textOf(await call(alice, ResultTool, { held_id: heldId }))).toBe("wrote /srv/out.txt")
    expect(writes).toHaveLength(1)
  })

  it("an admin removing a binding (a narrowing, applied at once) stops that subject's next call at the kernel, though the endpoint still maps it", async () => {
    const alice = await connectClient(Alice)
    expect(textOf(await call(alice, "fs_read", { path: "/srv/a" }))).toBe("read /srv/a")
    const kernelConn = await connectAs(nats.servers, "kernel")
    try {
      const narrowed: Profile = { ...profile, identities: (profile.identities ?? []).filter((b) => !("subject" in b && b.subject === Alice.id)) }
      const applied = await clientFor(kernelConn, "admin:root").applyPolicy(narrowed as never)
      expect(applied.status).toBe(200)
    } finally {
      await kernelConn.close()
    }
    const r = await call(alice, "fs_read", { path: "/srv/b" })
    expect(r.isError).toBe(true)
    expect(textOf(r)).toContain(`no identity binding in force maps ${idp.issuer} '${Alice.id}' to agent:alice`)
    // Bob's binding still holds.
    const bob = await connectClient(Bob)
    expect(textOf(await call(bob, "fs_read", { path: "/srv/c" }))).toBe("read /srv/c")
  })
})

describe("the wk mcp serve --http command", () => {
  it("serves the endpoint from its config: keys it holds (mode 0600), bindings from the profile files, tools from the bridge's catalog", async () => {
    const dir = mkdtempSync(join(tmpdir(), "wk-mcp-http-"))
    const cliResource = new URL(`http://127.0.0.1:${await freePort()}/team/mcp`)
    const keyFile = join(dir, "bob.key.json")
    const bobKey = devKeyPair("agent:bob")
    writeFileSync(keyFile, JSON.stringify({ type: "ed25519", public_key: Buffer.from(bobKey.publicKey).toString("base64"), secret_key: Buffer.from(bobKey.secretKey).toString("base64") }), { mode: 0o600 })
    // The organization's profile, as applied to the kernel, with a binding for this endpoint's resource.
    const org = join(dir, "org.json")
    writeFileSync(org, JSON.stringify({ ...profile, identities: [{ issuer: idp.issuer, audience: cliResource.href, subject: Bob.id, principal: "agent:bob" }] }))
    const kernelConn = await connectAs(nats.servers, "kernel")
    try {
      const widened = { ...profile, identities: [...(profile.identities ?? []), { issuer: idp.issuer, audience: cliResource.href, subject: Bob.id, principal: "agent:bob" }] }
      const root = clientFor(kernelConn, "admin:root")
      const ops = clientFor(witnessConn, "admin:ops")
      expect((await applyPolicyWitnessed(root, ops, widened)).status).toBe(200)
    } finally {
      await kernelConn.close()
    }
    const catalog = join(dir, "tools.json")
    writeCatalog(catalog, upstream)
    const config = join(dir, "wk-mcp-http.json")
    writeFileSync(config, JSON.stringify({ listen: { host: "127.0.0.1", port: Number(cliResource.port) }, resource: cliResource.href, issuers: [{ issuer: idp.issuer }], principals: { "agent:bob": { key_file: keyFile } }, profiles: [org], catalog, hold_wait_ms: 200 }))
    const proc = spawn(process.execPath, [join(repoRoot, "runtime/cli/wk.mjs"), "mcp", "serve", "--http", "--config", config], { env: { ...process.env, NATS_URL: `nats://${nats.servers}`, WK_CONFIG_DIR: mkdtempSync(join(tmpdir(), "wk-cfg-")) }, stdio: ["ignore", "pipe", "pipe"] })
    try {
      let out = ""
      proc.stdout!.on("data", (d: Buffer) => (out += d.toString()))
      proc.stderr!.on("data", (d: Buffer) => (out += d.toString()))
      await eventually(async () => out.includes("listening on"), 90_000)
      const client = new Client({ name: "bob via wk", version: "1.0.0" })
      await client.connect(new StreamableHTTPClientTransport(cliResource, { authProvider: new ClientCredentialsProvider({ clientId: Bob.id, clientSecret: Bob.secret, expectedIssuer: idp.issuer }) }))
      opened.push(client)
      expect(textOf(await call(client, "fs_read", { path: "/srv/cli" }))).toBe("read /srv/cli")
      // Alice's token is verified but maps to no principal this endpoint holds a key for.
      const aliceToken = (await idp.token(Alice, cliResource.href)).access_token
      const r = await fetch(cliResource, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${aliceToken}` }, body: JSON.stringify(initialize) })
      expect(r.status).toBe(403)
    } finally {
      proc.kill()
    }
  }, 150_000)
})

/** The envelope payloads of every call proposed for `tool`, from the record (WK_EVENTS), in order. */
const proposedPayloads = async (tool: string): Promise<Array<Record<string, unknown>>> => {
  const reader = await connectAs(nats.servers, "kernel")
  const jsm = await jetstreamManager(reader)
  const out: Array<Record<string, unknown>> = []
  for (let seq = 1; ; ) {
    const m = await jsm.direct.getMessage(Streams.events, { next_by_subj: Subjects.events("*"), seq })
    if (m === null) return (await reader.close(), out)
    for (const { event } of /\.h_[0-9a-f]+$/.test(m.subject) ? eventsOfMessage(m.seq, m.data) : []) {
      const payload = (event as { type: string; envelope?: { payload: Record<string, unknown> } }).envelope?.payload
      if (event.type === "call.proposed" && payload?.["tool"] === tool) out.push(payload)
    }
    seq = m.seq + 1
  }
}
