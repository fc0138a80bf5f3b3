import { Either, ParseResult, Schema } from "effect"
import { readFileSync } from "node:fs"

/** A signed webhook: the request as JSON (or a chat message), HMAC-SHA256 of the body under `secret`. */
export const WebhookRoute = Schema.Struct({
  kind: Schema.Literal("webhook"),
  url: Schema.String.pipe(Schema.pattern(/^https?:\/\//, { message: () => "expected an http:// or https:// URL" })),
  secret: Schema.String.pipe(Schema.minLength(16, { message: () => "a webhook secret is at least 16 characters" })),
  /** `json` (default): the witness request as it is; `chat`: `{text}` for chat incoming webhooks. */
  format: Schema.optionalWith(Schema.Literal("json", "chat"), { default: () => "json" as const })
})

/** Email through an SMTP server. */
export const SmtpRoute = Schema.Struct({
  kind: Schema.Literal("smtp"),
  host: Schema.String,
  port: Schema.Int.pipe(Schema.between(1, 65535)),
  secure: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  user: Schema.optional(Schema.String),
  pass: Schema.optional(Schema.String),
  from: Schema.String,
  to: Schema.Array(Schema.String).pipe(Schema.minItems(1))
})

export const Route = Schema.Union(WebhookRoute, SmtpRoute)
export type Route = typeof Route.Type

/** `wk route --config FILE`: the routes, by name (a token: it names the durable consumer), and where the inbox is. */
export const RouteConfig = Schema.Struct({
  routes: Schema.Record({ key: Schema.String.pipe(Schema.pattern(/^[a-z][a-z0-9_-]{0,31}$/, { message: () => "route names are lowercase tokens" })), value: Route }),
  gateway_url: Schema.optional(Schema.String),
  /** Retry backoff of a failed delivery: `base_ms` doubling to `max_ms` (default 1 s to 5 min). */
  retry: Schema.optionalWith(Schema.Struct({ base_ms: Schema.Int.pipe(Schema.positive()), max_ms: Schema.Int.pipe(Schema.positive()) }), { default: () => ({ base_ms: 1_000, max_ms: 300_000 }) })
})
export type RouteConfig = typeof RouteConfig.Type

/** The config in `text`, or one line naming the field that is wrong. */
export const decodeRouteConfig = (text: string, source: string): Either.Either<RouteConfig, string> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    return Either.left(`${source}: not JSON (${e instanceof Error ? e.message : String(e)})`)
  }
  return Schema.decodeUnknownEither(RouteConfig)(json, { onExcessProperty: "error" }).pipe(
    Either.mapLeft((e) => {
      const issue = ParseResult.ArrayFormatter.formatErrorSync(e)[0]
      return `${source}: ${issue === undefined ? e.message : `${issue.path.length > 0 ? issue.path.join(".") : "(top)"}: ${issue.message}`}`
    })
  )
}

export const loadRouteConfig = (path: string): Either.Either<RouteConfig, string> => {
  try {
    return decodeRouteConfig(readFileSync(path, "utf8"), path)
  } catch (e) {
    return Either.left(`cannot read ${path}: ${e instanceof Error ? e.message : String(e)}`)
  }
}
