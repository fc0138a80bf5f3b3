import { Either, ParseResult, Schema } from "effect"
import { invalidRequest, type Reply } from "./Reply.js"

/** Decodes with a schema; failure is the 400 reply naming the first offending field. */
export const decodeWith = <A, I>(schema: Schema.Schema<A, I>, value: unknown, prefix = ""): Either.Either<A, Reply> => {
  const result = Schema.decodeUnknownEither(schema, { errors: "first", onExcessProperty: "ignore" })(value)
  if (Either.isRight(result)) return Either.right(result.right)
  const issue = ParseResult.ArrayFormatter.formatErrorSync(result.left)[0]
  const path = [prefix, ...(issue?.path ?? []).map(String)].filter((p) => p !== "").join(".")
  return Either.left(invalidRequest(issue ? `${path || "request"}: ${issue.message}` : "request does not match the schema", path))
}
