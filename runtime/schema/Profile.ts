import { Schema } from "effect"
import { IdentityBinding } from "./IdentityBinding.js"
import { PasskeyEntry } from "./Passkey.js"
import { PluginPin } from "./PluginPin.js"
import { Preferences } from "./Preferences.js"
import { PresentationTemplate } from "./PresentationTemplate.js"
import { WitnessContract } from "./WitnessContract.js"
import type { JsonValue } from "./Json.js"

/**
 * Tool names starting with `kernel_` belong to the kernel (`kernel_policy_apply`): only the
 * kernel's own path proposes and decides them. No profile grants one, and no transform pin's
 * config names one (an alias onto a kernel tool would skip the kernel's own checks).
 */
export const ReservedToolPrefix = "kernel_"

/** Whether a tool name is reserved for the kernel. */
export const isReservedTool = (tool: string): boolean => tool.startsWith(ReservedToolPrefix)

const GrantedTool = Schema.String.pipe(
  Schema.filter((tool) => !isReservedTool(tool) || `'${tool}' is a reserved kernel tool: tools named ${ReservedToolPrefix}* are never granted`)
)

/** The path (inside `value`) of the first string that names a reserved kernel tool, if any. */
const reservedToolIn = (value: JsonValue | undefined, path: ReadonlyArray<string> = []): { path: ReadonlyArray<string>; tool: string } | undefined => {
  if (typeof value === "string") return isReservedTool(value) ? { path, tool: value } : undefined
  if (value === null || typeof value !== "object") return undefined
  for (const [k, v] of Array.isArray(value) ? value.map((v, i) => [String(i), v] as const) : Object.entries(value)) {
    const hit = reservedToolIn(v, [...path, k])
    if (hit !== undefined) return hit
  }
  return undefined
}

/** A pin; a transform pin whose config names a kernel tool is refused at that config field. */
const ProfilePin = PluginPin.pipe(
  Schema.filter((pin) => {
    if (!pin.stages.includes("transform")) return true
    const hit = reservedToolIn(pin.config)
    return hit === undefined || { path: ["config", ...hit.path], message: `'${hit.tool}' is a reserved kernel tool: a transform may not produce a ${ReservedToolPrefix}* call` }
  })
)

/** A registered principal: its ed25519 public keys (base64) and witness classes. */
export const PrincipalEntry = Schema.Struct({
  keys: Schema.Array(Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9+/]{43}=$/, { message: () => "expected a base64 ed25519 public key (32 bytes)" }))),
  classes: Schema.Array(Schema.String.pipe(Schema.minLength(1))),
  /** WebAuthn credentials (passkeys) the principal signs attestations with, besides its ed25519 keys. */
  passkeys: Schema.optional(Schema.Array(PasskeyEntry)),
  /**
   * The session namespace the principal acts in (`alice`: its sessions are `alice.*`, as its
   * confined NATS user). A witness in a call's session namespace, or in its proposer's, is not
   * independent of the proposer, whatever its principal and key.
   */
  namespace: Schema.optional(Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]+$/, { message: () => "a session namespace is one token" })))
})
export type PrincipalEntry = typeof PrincipalEntry.Type

/** The spine's rule adjudicator for one tool: amount thresholds read from one argument. */
export const ToolRule = Schema.Struct({
  amount_field: Schema.optional(Schema.String),
  /** Above this amount the call needs a witness. */
  witness_above: Schema.optional(Schema.Number),
  /** Above this amount the call is denied. */
  deny_above: Schema.optional(Schema.Number),
  /** Always needs a witness. */
  always_witness: Schema.optional(Schema.Boolean),
  /** The tool applies a request at most once per idempotency key: an unknown outcome may be re-sent. */
  idempotent: Schema.optional(Schema.Boolean),
  /**
   * Whether the tool answers read-back on `wk.v1.tools.<tool>.readback` (default true). With
   * read-back, a read-back nobody answers is an outage and is asked again until the call
   * expires; `false` sends an unknown outcome at once to the idempotent re-send or to a
   * read-back witness or an admin.
   */
  readback: Schema.optional(Schema.Boolean),
  /** Who may attest whether an unknown outcome happened (`effect_happened` / `no_effect`), besides the contract's witnesses. */
  readback_witnesses: Schema.optional(Schema.Struct({ classes: Schema.optional(Schema.Array(Schema.String)), principals: Schema.optional(Schema.Array(Schema.String)) })),
  contract: Schema.optional(
    WitnessContract.pipe(Schema.filter((c) => c.route === undefined || { path: ["route"], message: "a contract's route comes from preferences.witness_route, not from a rule" }))
  )
})
export type ToolRule = typeof ToolRule.Type

export const Layer = Schema.Literal("floor", "organization", "project", "user")

/** A policy profile document (profiles/README.md). */
export const Profile = Schema.Struct({
  name: Schema.String.pipe(Schema.minLength(1)),
  layer: Schema.optional(Layer),
  principals: Schema.optional(Schema.Record({ key: Schema.String, value: PrincipalEntry })),
  /** Tools each principal may call at all; everything else is denied by the kernel floor. */
  grants: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Array(GrantedTool) })),
  rules: Schema.optional(Schema.Record({ key: Schema.String, value: ToolRule })),
  /** How long a held call waits before it expires. */
  held_ttl_ms: Schema.optional(Schema.Int.pipe(Schema.positive())),
  /** How deep a chain of nested held calls (a witness provider's own governed calls) may go; the smallest across profiles wins. */
  max_dependency_depth: Schema.optional(Schema.Int.pipe(Schema.between(0, 16))),
  /** Principals allowed to apply policy (`wk.v1.admin.policy.apply`). */
  admins: Schema.optional(Schema.Array(Schema.String)),
  /** Preferences per principal ("*" for every principal); they only narrow (runtime/policy/Preferences.ts). */
  preferences: Schema.optional(Schema.Record({ key: Schema.String, value: Preferences })),
  /**
   * A one-line summary per tool for the people who decide its held calls, with `{field}`
   * placeholders for arguments ("Transfer {amount} EUR from {from} to {to}"); rendered into the
   * presentation witnesses sign over (runtime/policy/PresentationTemplate.ts).
   */
  presentation: Schema.optional(Schema.Record({ key: Schema.String, value: PresentationTemplate })),
  /** Plugins this profile pins by name, version, sha256 and signer (PluginPin.ts). */
  plugins: Schema.optional(Schema.Array(ProfilePin)),
  /** Bearer tokens (issuer, audience, subject or group) bound to principals: who the MCP endpoint may sign for (IdentityBinding.ts). */
  identities: Schema.optional(Schema.Array(IdentityBinding))
})
export type Profile = typeof Profile.Type
