import { Schema } from "effect"
import { JsonObject } from "./Json.js"
import { CallPreferences } from "./Requests.js"
import { WitnessContract } from "./WitnessContract.js"

/** One held call up a dependency chain: its id and the digest of the call it proposed. */
export const Ancestor = Schema.Struct({ held_id: Schema.String, call_digest: Schema.String })
export type Ancestor = typeof Ancestor.Type

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
  /** The digest of the continuation the kernel keeps for this call (object store `wk_continuations`), returned with its delivery. */
  continuation_digest: Schema.optional(Schema.String),
  preferences: Schema.optional(CallPreferences),
  idempotency_key: Schema.String,
  /** The salt of the held id (`heldIdOf(principal, session, turn, call, salt)`); absent in logs of unsalted ids. */
  held_id_salt: Schema.optional(Schema.String),
  created_at: Schema.String,
  expires_at: Schema.String,
  /** The held call this one serves (a witness provider's governed call); absent for a root call. */
  parent_held_id: Schema.optional(Schema.String),
  /** The chain above this call, root first, ending with the parent; its length is this call's depth. */
  ancestors: Schema.optional(Schema.Array(Ancestor)),
  /** Set when a witness edited this generation's arguments (`call.edited`): who, and what it replaced. */
  edited_by: Schema.optional(
    Schema.Struct({
      witness: Schema.String,
      class: Schema.String,
      from_call_digest: Schema.String,
      reason: Schema.optional(Schema.String),
      /**
       * Every principal that edited the call, in order: each proposed an edited generation, so no
       * approval of theirs counts for the call and no witness acting in their namespace does.
       */
      editors: Schema.optional(Schema.Array(Schema.String)),
      /**
       * The contract the call was held with when it was edited (joined across edits): an edited
       * call is released only by it, whatever its new arguments would need on their own.
       */
      contract: Schema.optional(WitnessContract)
    })
  )
})
export type HeldCallSpec = typeof HeldCallSpec.Type
