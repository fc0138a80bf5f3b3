import { Either, ParseResult, Schema } from "effect"
import { readFileSync } from "node:fs"

/**
 * `wk verifier --config FILE`: who the verifier attests as, and what it may read. Contracts name
 * repositories and connections by these names only, so a contract can never point a verifier at
 * a path or a database its operator did not list.
 */
export const VerifierConfig = Schema.Struct({
  principal: Schema.String.pipe(Schema.pattern(/^[a-z]+:[A-Za-z0-9_.-]+$/, { message: () => "expected a principal such as svc:verifier" })),
  key_file: Schema.optional(Schema.String),
  /** The class it attests under (default `verifier`): the terms' `by` names it. */
  class: Schema.optionalWith(Schema.String.pipe(Schema.minLength(1)), { default: () => "verifier" }),
  /** How long one check may take (default 10 s). */
  timeout_ms: Schema.optionalWith(Schema.Int.pipe(Schema.between(100, 300_000)), { default: () => 10_000 }),
  /** `git-ancestry`: repository name -> a path the verifier may read. */
  git: Schema.optional(Schema.Struct({ repos: Schema.Record({ key: Schema.String, value: Schema.String }) })),
  /** `sql-readback`: connection name -> a PostgreSQL URL that logs in as a read-only role. */
  sql: Schema.optional(Schema.Struct({ connections: Schema.Record({ key: Schema.String, value: Schema.String.pipe(Schema.pattern(/^postgres(ql)?:\/\//, { message: () => "expected a postgres:// URL" })) }) }))
})
export type VerifierConfig = typeof VerifierConfig.Type

/** The config at `path`, or one line naming the field that is wrong. */
export const loadVerifierConfig = (path: string): Either.Either<VerifierConfig, string> => {
  let json: unknown
  try {
    json = JSON.parse(readFileSync(path, "utf8"))
  } catch (e) {
    return Either.left(`${path}: ${e instanceof Error ? e.message : String(e)}`)
  }
  return Schema.decodeUnknownEither(VerifierConfig)(json, { onExcessProperty: "error" }).pipe(
    Either.mapLeft((e) => {
      const issue = ParseResult.ArrayFormatter.formatErrorSync(e)[0]
      return `${path}: ${issue === undefined ? e.message : `${issue.path.length > 0 ? issue.path.join(".") : "(top)"}: ${issue.message}`}`
    })
  )
}
