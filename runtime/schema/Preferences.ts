import { Schema } from "effect"
import { WitnessRule } from "./WitnessContract.js"

/** The longest a proposer may ask the kernel to block for a held call's answer. */
export const MaxBlockMs = 30_000

/**
 * How the propose reply waits. `block` waits up to `max_ms` for a held call to end (a quick
 * witness) before answering 202; `background` answers 202 at once, even for ALLOW, and the
 * result arrives on the session. The default answers ALLOW with its result and a hold with 202.
 */
export const WaitPreference = Schema.Union(
  Schema.Struct({ mode: Schema.Literal("block"), max_ms: Schema.Int.pipe(Schema.between(0, MaxBlockMs)) }),
  Schema.Struct({ mode: Schema.Literal("background") })
).annotations({ identifier: "WaitPreference" })
export type WaitPreference = typeof WaitPreference.Type

/**
 * How kernel-approved replacements are experienced. `auto` runs them; `preview` holds the
 * call so a witness sees the replacement first; `forbid` denies a call whose tool was swapped.
 */
export const TransformPosture = Schema.Struct({
  /** Replacements a plugin marks `kind: "canonicalize"` (formatting, path normalization). */
  canonicalize: Schema.optional(Schema.Literal("auto", "preview")),
  /** Every other same-tool replacement. */
  rewrite: Schema.optional(Schema.Literal("auto", "preview")),
  /** A replacement that runs a different tool. */
  substitution: Schema.optional(Schema.Literal("allow", "preview", "forbid"))
}).annotations({ parseOptions: { onExcessProperty: "error" } })
export type TransformPosture = typeof TransformPosture.Type

/** What a witness is shown: the exact arguments, or a summary with every value redacted. */
export const Disclosure = Schema.Literal("exact", "redacted")
export type Disclosure = typeof Disclosure.Type

const ToolPattern = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_.:-]+\*?$/, { message: () => "expected a tool name, optionally ending in '*'" }))

/**
 * Preferences a user layer sets for its principals (profiles' `preferences`) and a proposer
 * sets per call. Each only narrows: merging keeps the stricter choice, and a per-call value
 * that is looser than its layers is refused (runtime/policy/Preferences.ts).
 */
const fields = {
  /** Ask for a witness even where policy would allow. */
  require_witness: Schema.optional(Schema.Boolean),
  /** Tools (a trailing `*` matches a prefix) that always need a witness: "always witness money movement". */
  always_witness: Schema.optional(Schema.Array(ToolPattern).pipe(Schema.maxItems(100))),
  /**
   * Who may witness the holds that preferences cause ("route me"): only approvals from witnesses
   * the route admits count (runtime/schema/WitnessContract.ts `routeAdmits`). It picks among the
   * witnesses the hold's contract admits and never replaces it; routes of several layers and the
   * call all apply. On a hold policy causes, it applies only where the witnesses it admits can
   * meet the contract alone, else it is ignored with a recorded reason (heldcall/PolicyRoute.ts).
   */
  witness_route: Schema.optional(WitnessRule),
  /** Shorten the hold (fail closed sooner); never lengthens the profile's limit. */
  expires_in_ms: Schema.optional(Schema.Int.pipe(Schema.positive())),
  wait: Schema.optional(WaitPreference),
  /** Cancel the held call when the proposer's session is no longer connected. */
  cancel_on_disconnect: Schema.optional(Schema.Boolean),
  transforms: Schema.optional(TransformPosture),
  disclosure: Schema.optional(Disclosure)
}

export const Preferences = Schema.Struct(fields).annotations({ parseOptions: { onExcessProperty: "error" }, identifier: "Preferences" })
export type Preferences = typeof Preferences.Type

/** Narrow-only per-call preferences (unknown keys are refused). */
export const CallPreferences = Preferences
export type CallPreferences = Preferences
