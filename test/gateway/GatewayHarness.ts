import { HttpServer } from "@effect/platform"
import type { NatsConnection } from "@nats-io/transport-node"
import { Effect, ManagedRuntime } from "effect"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { layerGateway } from "../../runtime/gateway/Gateway.js"
import { GatewayMetricsAddress } from "../../runtime/gateway/GatewayMetrics.js"
import { signEnvelope } from "../../runtime/schema/EnvelopeSignature.js"
import { devKeyPair } from "../../runtime/client/DevKeys.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { connectAs, testProfile } from "../support/Principals.js"
import { Roles, startTestNats, type TestNats } from "../support/TestNats.js"
import { pinOf } from "../support/Pins.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import { randomBytes } from "node:crypto"
import type { Profile } from "../../runtime/schema/Profile.js"

/** A real nats-server, an in-process kernel, the demo bank and the gateway on a free localhost port. */
export interface GatewayHarness {
  readonly url: string
  /** The gateway's metrics port (`/metrics`), apart from its public one. */
  readonly metricsUrl: string
  readonly nats: TestNats
  readonly bank: DemoBank
  readonly kernelConn: NatsConnection
  readonly stop: () => Promise<void>
}

/** A token the vault tools leak; secret-detect quarantines anything carrying it. */
export const LeakedToken = "AKIA" + "IOSFODNN7EXAMPLE"

/** Tools that leak a token: `vault_read` in its result, `vault_fail` in its error. */
const serveVault = (nc: NatsConnection) => {
  const reply = (body: unknown) => new TextEncoder().encode(JSON.stringify(body))
  nc.subscribe(Subjects.toolInvoke("vault_read"), { callback: (_e, m) => void m.respond(reply({ ok: true, result: { token: LeakedToken } })) })
  nc.subscribe(Subjects.toolInvoke("vault_fail"), { callback: (_e, m) => void m.respond(reply({ ok: false, error: `vault sealed; last token was ${LeakedToken}` })) })
}

/** The test organization plus the vault tools for agent:alice and result admission by secret-detect. */
export const gatewayProfile = () => {
  const base = testProfile()
  return testProfile({ grants: { ...base.grants, "agent:alice": [...(base.grants?.["agent:alice"] ?? []), "vault_read", "vault_fail"] }, plugins: [pinOf("secret-detect", { stages: ["admit"], timeout_ms: 2000 })] })
}

/** Starts the harness with `profile` in force (the gateway tests' profile unless given). */
export const startGatewayHarness = async (profile: Profile = gatewayProfile()): Promise<GatewayHarness> => {
  const nats = await startTestNats()
  const kernel: InProcessKernel = await startKernel(nats.servers, [profile])
  const toolConn = await connectAs(nats.servers, "bank")
  const echoConn = await connectAs(nats.servers, "echo")
  const kernelConn = await connectAs(nats.servers, "kernel")
  const bank = new DemoBank().serve(toolConn)
  serveVault(echoConn)
  const gateway = ManagedRuntime.make(layerGateway({ nats: { servers: nats.servers, ...Roles.gateway }, port: 0, metrics: { port: 0 } }))
  const address = await gateway.runPromise(Effect.map(HttpServer.HttpServer, (s) => s.address))
  if (address._tag !== "TcpAddress") throw new Error("gateway is not on TCP")
  const metrics = await gateway.runPromise(GatewayMetricsAddress)
  return {
    url: `http://127.0.0.1:${address.port}`,
    metricsUrl: `http://127.0.0.1:${metrics.port}`,
    nats,
    bank,
    kernelConn,
    stop: async () => {
      await gateway.dispose()
      await kernel.stop()
      await Promise.all([toolConn.close(), echoConn.close(), kernelConn.close()])
      await nats.dispose()
    }
  }
}

/** A signed envelope as a dev principal would send it. */
export const signedAs = (principal: string, payload: Record<string, unknown>) => signEnvelope({ ...payload, principal }, devKeyPair(principal).secretKey)

let n = 0
/** A propose envelope for a transfer by agent:alice (above 1000 is held for a human). */
export const transfer = (amount: number, session = "s-gw", preferences?: Record<string, unknown>) =>
  signedAs("agent:alice", { op: "propose", session_id: session, turn_id: "t1", call_id: `gw${Date.now()}-${++n}`, tool: "money_transfer", args: { from: "alice", to: "bob", amount }, ...(preferences ? { preferences } : {}), ...fresh() })

/** The fields that make a propose envelope fresh: a new nonce and an expiry five minutes ahead. */
export const fresh = () => ({ nonce: randomBytes(12).toString("hex"), expires_at: new Date(Date.now() + 300_000).toISOString() })

export const post = async (url: string, body: unknown) => {
  const r = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: typeof body === "string" ? body : JSON.stringify(body) })
  return { status: r.status, body: (await r.json()) as Record<string, any> }
}
/** The `Authorization` header of a signed read by a dev principal (fresh nonce, now, unless given). */
export const readAuth = (principal: string, method: string, path: string, opts: { issuedAt?: string; nonce?: string } = {}) => {
  const payload = { op: "read", principal, method, path, issued_at: opts.issuedAt ?? new Date().toISOString(), nonce: opts.nonce ?? randomBytes(12).toString("hex") }
  return `WK-Read ${Buffer.from(JSON.stringify(signedAs(principal, payload))).toString("base64")}`
}

/** A GET as `principal` (a signed read), or unsigned when `principal` is null; `path` includes any query. */
export const getAs = async (base: string, principal: string | null, path: string, headers: Record<string, string> = {}) => {
  const r = await fetch(base + path, { headers: { ...(principal === null ? {} : { authorization: readAuth(principal, "GET", path) }), ...headers } })
  return { status: r.status, body: (await r.json()) as Record<string, any> }
}

/** An unsigned GET (static files, and reads that must be refused). */
export const getJson = async (url: string) => {
  const r = await fetch(url)
  return { status: r.status, body: (await r.json()) as Record<string, any> }
}

/** Reads a server-sent event stream until `done(text)` or the deadline; returns what arrived. */
export const readStream = async (r: Response, done: (text: string) => boolean, ms = 15_000) => {
  const reader = r.body!.getReader()
  let text = ""
  const deadline = Date.now() + ms
  try {
    while (!done(text) && Date.now() < deadline) {
      const next = await Promise.race([reader.read(), new Promise<null>((ok) => setTimeout(() => ok(null), Math.max(1, deadline - Date.now())))])
      if (next === null || next.done) break
      text += new TextDecoder().decode(next.value)
    }
  } finally {
    await reader.cancel().catch(() => undefined)
  }
  return text
}
