import { Schema } from "effect"
import { canonicalize } from "./Canonical.js"
import { JsonValue } from "./Json.js"
import { Capabilities, Egress, PluginName, PublicKey, Sha256Hex, Stage } from "./PluginManifest.js"

/** Defaults a pin gets for the fields it leaves out. */
export const PinDefaults = {
  timeout_ms: 50,
  memory_max_pages: 16,
  fallback: "DENY",
  precedence: 100,
  egress: "none"
} as const

/**
 * A profile's pin of one plugin: the kernel loads only this name, version, wasm digest and
 * signer, links only the granted host functions, and enforces the limits.
 */
export const PluginPin = Schema.Struct({
  name: PluginName,
  version: Schema.String.pipe(Schema.minLength(1)),
  /** sha256 of the exact wasm bytes: the plugin's identity. */
  sha256: Sha256Hex,
  /** The ed25519 key the manifest must be signed with (base64). */
  signer: PublicKey,
  /** Stages granted (a subset of what the manifest declares). */
  stages: Schema.Array(Stage).pipe(Schema.minItems(1)),
  /** Host capabilities granted (a subset of what the manifest requests). Default: none. */
  capabilities: Schema.optional(Capabilities),
  /** Highest egress class the profile accepts. Default: none. */
  egress: Schema.optional(Egress),
  /** Wall-clock limit per call, enforced by terminating the plugin's worker. */
  timeout_ms: Schema.optional(Schema.Int.pipe(Schema.between(1, 60_000))),
  /** Linear memory limit in 64 KiB pages; also bounds host-side allocations per call. */
  memory_max_pages: Schema.optional(Schema.Int.pipe(Schema.between(1, 4096))),
  /** Verdict on any fault of this plugin (adjudicate, transform, witness_contract). Admission faults always quarantine. */
  fallback: Schema.optional(Schema.Literal("DENY", "REQUIRE_WITNESS")),
  /** Lower runs first. Order matters only for transforms; folding is order-free. */
  precedence: Schema.optional(Schema.Int),
  /** Plugin configuration, passed as `config` in every stage input. */
  config: Schema.optional(JsonValue),
  /**
   * `auto` (default): under a fuel budget when the plugin needs no asynchronous host function
   * (no `kv`, no `counter`) and its code can be metered; otherwise under a watchdog that
   * terminates its worker at `timeout_ms`. `worker` forces the watchdog. Both run on worker threads.
   */
  isolation: Schema.optional(Schema.Literal("auto", "worker"))
})
export type PluginPin = typeof PluginPin.Type

/** `name@version`, the way decisions and errors name a plugin. */
export const pinLabel = (pin: { readonly name: string; readonly version: string }): string => `${pin.name}@${pin.version}`

/** A pin with every default filled in. */
export interface ResolvedPin {
  readonly name: string
  readonly version: string
  readonly sha256: string
  readonly signer: string
  readonly stages: ReadonlyArray<Stage>
  readonly capabilities: Capabilities
  readonly egress: Egress
  readonly timeout_ms: number
  readonly memory_max_pages: number
  readonly fallback: "DENY" | "REQUIRE_WITNESS"
  readonly precedence: number
  readonly config: JsonValue
  readonly isolation: "auto" | "worker"
}

export const resolvePin = (pin: PluginPin): ResolvedPin => ({
  name: pin.name,
  version: pin.version,
  sha256: pin.sha256,
  signer: pin.signer,
  stages: pin.stages,
  capabilities: pin.capabilities ?? { host_functions: [] },
  egress: pin.egress ?? PinDefaults.egress,
  timeout_ms: pin.timeout_ms ?? PinDefaults.timeout_ms,
  memory_max_pages: pin.memory_max_pages ?? PinDefaults.memory_max_pages,
  fallback: pin.fallback ?? PinDefaults.fallback,
  precedence: pin.precedence ?? PinDefaults.precedence,
  config: pin.config ?? {},
  isolation: pin.isolation ?? "auto"
})

// A pin from a decoded profile is never changed: its canonical text is computed once.
const identities = new WeakMap<PluginPin, string>()

/** A pin's identity: its JCS text, the same for two pins that say the same (set members, map keys, the last tie-break in pin order). */
export const pinIdentity = (pin: PluginPin): string => {
  let text = identities.get(pin)
  if (text === undefined) identities.set(pin, (text = canonicalize(pin)))
  return text
}
