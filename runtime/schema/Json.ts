import { Schema } from "effect"

/** Any JSON value. Bounded depth is enforced by the request decoder, not here. */
export type JsonValue = string | number | boolean | null | ReadonlyArray<JsonValue> | { readonly [k: string]: JsonValue }

export const JsonValue: Schema.Schema<JsonValue> = Schema.Union(
  Schema.String,
  Schema.Number,
  Schema.Boolean,
  Schema.Null,
  Schema.Array(Schema.suspend(() => JsonValue)),
  Schema.Record({ key: Schema.String, value: Schema.suspend(() => JsonValue) })
)

/** A JSON object (tool arguments, results, profile documents). */
export const JsonObject = Schema.Record({ key: Schema.String, value: JsonValue })
export type JsonObject = typeof JsonObject.Type
