import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from "node:http"
import { randomUUID } from "node:crypto"
import type { AddressInfo } from "node:net"
import type { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js"
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js"
import type { WitnessClient } from "../../client/Client.js"
import type { IdentityBinding, OnBehalfOf } from "../../schema/IdentityBinding.js"
import { principalsFor } from "../../policy/IdentityBindings.js"
import { governingServer } from "./GoverningServer.js"
import type { ListedTool } from "./ToolCatalog.js"
import type { TokenVerifier, VerifiedToken } from "./TokenVerifier.js"

/** A principal the endpoint holds the key of: the client that signs as it, and where its held results are delivered. */
export interface HeldPrincipal {
  readonly client: WitnessClient
  readonly sessionId: string
}

export interface EndpointOptions {
  /** The endpoint's public URL (`https://wk.example.com/mcp`): the resource tokens must be issued for, and the path served. */
  readonly resource: URL
  /** The authorization servers the protected-resource metadata names (their issuers). */
  readonly authorizationServers: ReadonlyArray<string>
  readonly verifier: TokenVerifier
  /** The identity bindings in force (the policy's `identities`). */
  readonly bindings: () => ReadonlyArray<IdentityBinding>
  readonly principals: ReadonlyMap<string, HeldPrincipal>
  readonly tools: ReadonlyArray<ListedTool>
  readonly holdWaitMs: number
  readonly gatewayUrl?: string
  /** Scopes the protected-resource metadata lists (advisory: the bindings decide who acts). */
  readonly scopes?: ReadonlyArray<string>
}

/** One MCP session: its transport and governing server, and the token subject it belongs to. */
interface McpSession {
  readonly transport: StreamableHTTPServerTransport
  readonly server: Server
  readonly principal: string
  readonly issuer: string
  readonly subject: string
}

export interface HttpEndpoint {
  readonly url: URL
  /** Open MCP sessions, by principal (what a test or an operator counts). */
  readonly sessions: () => ReadonlyArray<{ readonly id: string; readonly principal: string; readonly subject: string }>
  readonly close: () => Promise<void>
}

/** Largest JSON-RPC body accepted. */
const MaxBody = 4 * 1024 * 1024

const readBody = (req: IncomingMessage): Promise<unknown> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    let size = 0
    req.on("data", (c: Buffer) => {
      size += c.length
      if (size > MaxBody) return void (reject(new Error("the request body is too large")), req.destroy())
      chunks.push(c)
    })
    req.on("end", () => {
      if (chunks.length === 0) return resolve(undefined)
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString("utf8")))
      } catch {
        reject(new Error("the request body is not JSON"))
      }
    })
    req.on("error", reject)
  })

const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { "content-type": "application/json", ...headers })
  res.end(JSON.stringify(body))
}

/** The RFC 9728 metadata URL of a resource: the well-known path with the resource's path after it. */
export const protectedResourceMetadataUrl = (resource: URL): URL => new URL(`/.well-known/oauth-protected-resource${resource.pathname === "/" ? "" : resource.pathname}`, resource)

/**
 * The governed MCP endpoint over streamable HTTP, an OAuth 2.1 protected resource (the MCP
 * authorization spec): it serves its protected-resource metadata, answers a request without a
 * valid bearer token 401 with a `WWW-Authenticate` challenge naming that metadata, and verifies
 * every request's token (signature against the issuer's JWKS, issuer, audience, expiry), so an
 * expired token stops the next request at once. A verified token acts as the one principal the
 * identity bindings map it to, and only if the endpoint holds that principal's key. Each
 * `initialize` opens an MCP session of its own with a governing server signing as that
 * principal; the session belongs to the token's issuer and subject, and a request on it with
 * another subject's token is refused. Every proposal names the request's token
 * (`on_behalf_of`), which the kernel checks against the bindings in force.
 */
export const startHttpEndpoint = async (opts: EndpointOptions, listen: { readonly host: string; readonly port: number }): Promise<HttpEndpoint> => {
  const sessions = new Map<string, McpSession>()
  const metadataUrl = protectedResourceMetadataUrl(opts.resource)
  const metadata = {
    resource: opts.resource.href,
    authorization_servers: [...opts.authorizationServers],
    bearer_methods_supported: ["header"],
    ...(opts.scopes !== undefined && opts.scopes.length > 0 ? { scopes_supported: [...opts.scopes] } : {}),
    resource_name: "Witness Kernel governed MCP tools"
  }
  const challenge = (res: ServerResponse, error: string | undefined, description: string) =>
    json(res, 401, { error: error ?? "unauthorized", error_description: description }, {
      "www-authenticate": `Bearer ${error !== undefined ? `error="${error}", error_description="${description.replace(/["\\]/g, "'")}", ` : ""}resource_metadata="${metadataUrl.href}"`
    })

  /** The principal a verified token acts as, or why it acts as none here. */
  const principalOf = (t: VerifiedToken): string | { refused: string } => {
    const bound = principalsFor(opts.bindings(), t.claims)
    if (bound.length === 0) return { refused: `no identity binding maps ${t.claims.issuer} '${t.claims.subject}' to a principal` }
    if (bound.length > 1) return { refused: `the identity bindings map ${t.claims.issuer} '${t.claims.subject}' to ${bound.join(", ")}: a token must act as one principal` }
    if (!opts.principals.has(bound[0]!)) return { refused: `this endpoint holds no key for ${bound[0]}` }
    return bound[0]!
  }

  /** What a proposal names as its token, re-checked on every call (the bindings may have changed since the session opened). */
  const behalfOf = (session: { principal: string; issuer: string; subject: string }) => (auth: AuthInfo | undefined): OnBehalfOf | string => {
    const verified = auth?.extra?.["verified"] as VerifiedToken | undefined
    if (auth === undefined || verified === undefined) return "the request carried no verified bearer token"
    if (verified.claims.issuer !== session.issuer || verified.claims.subject !== session.subject) return `this session belongs to ${session.issuer} '${session.subject}'`
    const principal = principalOf(verified)
    if (typeof principal !== "string") return principal.refused
    if (principal !== session.principal) return `the token now acts as ${principal}, not as this session's ${session.principal}`
    return { issuer: verified.claims.issuer, subject: verified.claims.subject, token: verified.token }
  }

  const openSession = async (principal: string, t: VerifiedToken): Promise<StreamableHTTPServerTransport> => {
    const held = opts.principals.get(principal)!
    const owner = { principal, issuer: t.claims.issuer, subject: t.claims.subject }
    const server = governingServer({ client: held.client, tools: opts.tools, sessionId: held.sessionId, holdWaitMs: opts.holdWaitMs, behalfOf: behalfOf(owner), ...(opts.gatewayUrl !== undefined ? { gatewayUrl: opts.gatewayUrl } : {}) })
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => void sessions.set(id, { transport, server, ...owner })
    })
    transport.onclose = () => {
      if (transport.sessionId !== undefined) sessions.delete(transport.sessionId)
    }
    await server.connect(transport)
    return transport
  }

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", opts.resource)
    if (req.method === "GET" && (url.pathname === metadataUrl.pathname || url.pathname === "/.well-known/oauth-protected-resource")) return json(res, 200, metadata, { "cache-control": "max-age=300" })
    if (url.pathname !== opts.resource.pathname) return json(res, 404, { error: "not_found" })
    const header = req.headers.authorization ?? ""
    const bearer = /^Bearer ([A-Za-z0-9._~+/-]+=*)$/i.exec(header)?.[1]
    if (bearer === undefined) return challenge(res, header === "" ? undefined : "invalid_request", header === "" ? "a bearer token is required" : "expected Authorization: Bearer <token>")
    const verified = await opts.verifier.verify(bearer)
    if ("refused" in verified) return challenge(res, "invalid_token", verified.refused)
    const principal = principalOf(verified)
    if (typeof principal !== "string") return json(res, 403, { error: "access_denied", error_description: principal.refused })
    const auth: AuthInfo & { extra: { verified: VerifiedToken } } = {
      token: bearer,
      clientId: verified.clientId,
      scopes: [...verified.scopes],
      expiresAt: verified.expiresAt,
      resource: opts.resource,
      extra: { verified }
    }
    const body = req.method === "POST" ? await readBody(req).catch((e: unknown) => e as Error) : undefined
    if (body instanceof Error) return json(res, 400, { jsonrpc: "2.0", error: { code: -32700, message: body.message }, id: null })
    const sessionId = req.headers["mcp-session-id"]
    const authed = Object.assign(req, { auth })
    if (typeof sessionId === "string") {
      const session = sessions.get(sessionId)
      if (session === undefined) return json(res, 404, { jsonrpc: "2.0", error: { code: -32001, message: "no such MCP session" }, id: null })
      if (session.issuer !== verified.claims.issuer || session.subject !== verified.claims.subject)
        return json(res, 403, { error: "access_denied", error_description: `this MCP session belongs to another subject than ${verified.claims.issuer} '${verified.claims.subject}'` })
      return session.transport.handleRequest(authed, res, body)
    }
    if (req.method !== "POST" || !isInitializeRequest(body)) return json(res, 400, { jsonrpc: "2.0", error: { code: -32000, message: "no MCP session: send initialize first, then the Mcp-Session-Id it answers" }, id: null })
    const transport = await openSession(principal, verified)
    return transport.handleRequest(authed, res, body)
  }

  const http: HttpServer = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      if (!res.headersSent) json(res, 500, { error: "server_error", error_description: e instanceof Error ? e.message : String(e) })
      else res.end()
    })
  })
  await new Promise<void>((resolve, reject) => {
    http.once("error", reject)
    http.listen(listen.port, listen.host, () => resolve())
  })
  const port = (http.address() as AddressInfo).port
  return {
    url: new URL(`http://${listen.host.includes(":") ? `[${listen.host}]` : listen.host}:${port}${opts.resource.pathname}`),
    sessions: () => [...sessions].map(([id, s]) => ({ id, principal: s.principal, subject: s.subject })),
    close: async () => {
      await Promise.all([...sessions.values()].map((s) => s.server.close().catch(() => undefined)))
      http.closeAllConnections()
      await new Promise<void>((resolve) => http.close(() => resolve()))
    }
  }
}
