import Provider from "oidc-provider"
import { exportJWK, generateKeyPair, type JWK } from "jose"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

/** A client the test authorization server knows: a machine client (client credentials) and the groups its tokens carry. */
export interface OidcClient {
  readonly id: string
  readonly secret: string
  readonly groups?: ReadonlyArray<string>
  /** Access token lifetime in seconds (default 300). */
  readonly ttl?: number
}

export interface OidcIssuer {
  readonly issuer: string
  /** A token for `client` issued for `resource` by the token endpoint (client credentials with an RFC 8707 resource indicator). */
  readonly token: (client: OidcClient, resource: string) => Promise<{ access_token: string; expires_in: number }>
  readonly close: () => Promise<void>
}

/**
 * A real OAuth 2.1 authorization server (`oidc-provider` from npm) on a loopback port: machine
 * clients get JWT access tokens (RFC 9068, ES256) for the resource they name, with a `groups`
 * claim; its JWKS and discovery documents are served as in production.
 */
export const startOidcIssuer = async (clients: ReadonlyArray<OidcClient>): Promise<OidcIssuer> => {
  const { privateKey } = await generateKeyPair("ES256", { extractable: true })
  const jwk: JWK = { ...(await exportJWK(privateKey)), alg: "ES256", use: "sig", kid: "test-es256" }
  const byId = new Map(clients.map((c) => [c.id, c]))
  // The issuer URL needs the port: listen first on a plain server, then mount the provider.
  let callback: ((req: IncomingMessage, res: ServerResponse) => void) | undefined
  const http: Server = createServer((req, res) => callback?.(req, res))
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", () => resolve()))
  const issuer = `http://127.0.0.1:${(http.address() as AddressInfo).port}`
  const provider = new Provider(issuer, {
    clients: clients.map((c) => ({ client_id: c.id, client_secret: c.secret, grant_types: ["client_credentials"], redirect_uris: [], response_types: [], token_endpoint_auth_method: "client_secret_basic", id_token_signed_response_alg: "ES256" })),
    jwks: { keys: [jwk] },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => undefined as unknown as string,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource, client) => ({
          scope: "mcp",
          audience: resource,
          accessTokenTTL: byId.get(client.clientId)?.ttl ?? 300,
          accessTokenFormat: "jwt",
          jwt: { sign: { alg: "ES256" } }
        })
      }
    },
    extraTokenClaims: (_ctx, token) => {
      const client = byId.get((token as { clientId?: string }).clientId ?? "")
      return client?.groups !== undefined ? { groups: [...client.groups] } : {}
    }
  })
  const handler = provider.callback()
  callback = (req, res) => void handler(req, res)
  return {
    issuer,
    token: async (client, resource) => {
      const r = await fetch(`${issuer}/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", authorization: `Basic ${Buffer.from(`${client.id}:${client.secret}`).toString("base64")}` },
        body: new URLSearchParams({ grant_type: "client_credentials", resource, scope: "mcp" })
      })
      if (!r.ok) throw new Error(`token endpoint: ${r.status} ${await r.text()}`)
      return (await r.json()) as { access_token: string; expires_in: number }
    },
    close: () => new Promise<void>((resolve) => (http.closeAllConnections(), http.close(() => resolve())))
  }
}
