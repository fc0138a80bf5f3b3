import { Schema } from "effect"
import { JsonObject } from "./Json.js"
import { CallPreferences } from "./Requests.js"

/** The immutable spec of one generation of a held call (the seed's `HeldCall`). */
export const HeldCallSpec = Schema.Struct({
  principal: Schema.String,
  session_id: Schema.String,
  turn_id: Schema.String,
  call_id: Schema.String,
  tool: Schema.String,
  args: JsonObject,
  call_digest: Schema.String,
  continuation_ref: Schema.optional(Schema.String),
  preferences: Schema.optional(CallPreferences),
  idempotency_key: Schema.String,
  created_at: Schema.String,
  expires_at: Schema.String
})
export type HeldCallSpec = typeof HeldCallSpec.Type
