import { Either, Schema } from "effect"
import { readFileSync } from "node:fs"
import { Profile } from "../../schema/Profile.js"
import type { IdentityBinding } from "../../schema/IdentityBinding.js"
import { bindingsOf } from "../../policy/IdentityBindings.js"
import { issueOf, ServerName, Upstream } from "./McpConfig.js"

const PrincipalName = Schema.String.pipe(Schema.pattern(/^[a-z]+:[A-Za-z0-9_.-]+$/, { message: () => "expected a principal such as agent:alice" }))
const SessionId = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+){0,7}$/))

/**
 * `wk mcp serve --http --config FILE`: the governed MCP endpoint for a team. Who may connect is
 * decided by tokens of the `issuers` for `resource` and by the policy's identity bindings (read
 * from `profiles`, the files the organization applies); whom it can sign for, by the keys of
 * `principals` it holds.
 */
export const HttpEndpointConfig = Schema.Struct({
  /** Where to listen (behind a TLS-terminating proxy in production). */
  listen: Schema.Struct({ host: Schema.String.pipe(Schema.minLength(1)), port: Schema.Int.pipe(Schema.between(0, 65535)) }),
  /** The endpoint's public URL as clients reach it: the audience its tokens must be issued for, and the path it serves. */
  resource: Schema.String.pipe(Schema.pattern(/^https?:\/\/[^\s/]+\/[^\s?#]*$/, { message: () => "expected the endpoint's public URL with its path, such as https://wk.example.com/mcp" })),
  /** The identity providers whose tokens are accepted: their issuer, and their JWKS (default: from their discovery document). */
  issuers: Schema.Array(Schema.Struct({ issuer: Schema.String.pipe(Schema.pattern(/^https?:\/\//)), jwks_uri: Schema.optional(Schema.String.pipe(Schema.pattern(/^https?:\/\//))) })).pipe(Schema.minItems(1)),
  /** The principals the endpoint signs for: each one's key (mode 0600) and the session its held results are delivered to. */
  principals: Schema.Record({ key: PrincipalName, value: Schema.Struct({ key_file: Schema.String.pipe(Schema.minLength(1)), session_id: Schema.optional(SessionId) }) }),
  /** The profile files whose `identities` map tokens to principals (the kernel checks every proposal against the bindings in force). */
  profiles: Schema.Array(Schema.String.pipe(Schema.minLength(1))).pipe(Schema.minItems(1)),
  hold_wait_ms: Schema.optionalWith(Schema.Int.pipe(Schema.between(0, 600_000)), { default: () => 10_000 }),
  gateway_url: Schema.optional(Schema.String),
  /** Scopes the protected-resource metadata advertises. */
  scopes: Schema.optional(Schema.Array(Schema.String)),
  servers: Schema.optional(Schema.Record({ key: ServerName, value: Upstream })),
  catalog: Schema.optional(Schema.String.pipe(Schema.minLength(1)))
}).pipe(Schema.filter((c) => (c.servers === undefined) !== (c.catalog === undefined) || { path: ["servers"], message: "give either servers (the upstreams) or catalog (the tool catalog the bridge writes), not both and not neither" }))
export type HttpEndpointConfig = typeof HttpEndpointConfig.Type

/** The session a principal's held results are delivered to: its configured one, else `mcp-<principal>` as a token. */
export const sessionOf = (principal: string, configured: string | undefined): string => configured ?? `mcp-${principal.replace(/[^A-Za-z0-9_-]/g, "_")}`

/** The config at `path`, or one line naming the field that is wrong. */
export const loadHttpEndpointConfig = (path: string): Either.Either<HttpEndpointConfig, string> => {
  let json: unknown
  try {
    json = JSON.parse(readFileSync(path, "utf8"))
  } catch (e) {
    return Either.left(`cannot read ${path}: ${e instanceof Error ? e.message : String(e)}`)
  }
  return Schema.decodeUnknownEither(HttpEndpointConfig)(json, { onExcessProperty: "error" }).pipe(Either.mapLeft((e) => issueOf(path, e)))
}

/** The identity bindings for `resource` in the profile files at `paths`, or one line naming the file that is wrong. */
export const readBindings = (paths: ReadonlyArray<string>, resource: string): Either.Either<ReadonlyArray<IdentityBinding>, string> => {
  const profiles: Array<Profile> = []
  for (const path of paths) {
    let json: unknown
    try {
      json = JSON.parse(readFileSync(path, "utf8"))
    } catch (e) {
      return Either.left(`cannot read the profile ${path}: ${e instanceof Error ? e.message : String(e)}`)
    }
    const decoded = Schema.decodeUnknownEither(Profile)(json)
    if (Either.isLeft(decoded)) return Either.left(issueOf(path, decoded.left))
    profiles.push(decoded.right)
  }
  return Either.right(bindingsOf(profiles).filter((b) => b.audience === resource))
}
