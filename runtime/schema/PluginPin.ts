import { Schema } from "effect"
import { canonicalize } from "./Canonical.js"
import { JsonValue } from "./Json.js"
import { Capabilities, Egress, PluginName, PublicKey, Sha256Hex, Stage } from "./PluginManifest.js"

/** A tool name, or a prefix of tool names ending in `*` (`fs_*`). */
export const ToolPattern = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_.:-]{1,128}\*?$|^\*$/, { message: () => "expected a tool name, optionally ending in '*' (or '*' alone: every tool)" }))

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
  /**
   * The tools the pin applies to: names, or prefixes ending in `*`. Absent: every tool. Data the
   * kernel checks without running the plugin: for a call of another tool, each granted stage is
   * recorded as not in scope (`{stage, scope: "not_in_scope", tool}`) instead of run.
   */
  tools: Schema.optional(Schema.Array(ToolPattern).pipe(Schema.minItems(1), Schema.maxItems(100))),
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
  /** The tool patterns it applies to; `["*"]` when the pin names none. */
  readonly tools: ReadonlyArray<string>
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
  tools: pin.tools ?? EveryTool,
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

const EveryTool: ReadonlyArray<string> = ["*"]

/** Does a tool pattern (`money_transfer`, a prefix `fs_*`, or `*`) match a tool? */
export const toolPatternMatches = (pattern: string, tool: string): boolean => (pattern.endsWith("*") ? tool.startsWith(pattern.slice(0, -1)) : pattern === tool)

/** Does the pin apply to calls of `tool` (its `tools`, or every tool when it names none)? Pure data: the plugin is not run. */
export const pinAppliesTo = (pin: { readonly tools?: ReadonlyArray<string> | undefined }, tool: string): boolean =>
  pin.tools === undefined || pin.tools.some((p) => toolPatternMatches(p, tool))

/** Does every tool matched by `pattern` also match one of `patterns`? */
const patternCovered = (pattern: string, patterns: ReadonlyArray<string>): boolean =>
  patterns.some((q) => (q.endsWith("*") ? pattern.startsWith(q.slice(0, -1)) : !pattern.endsWith("*") && q === pattern))

/**
 * The patterns of `before` that `after` no longer covers: the tools a pin stops applying to when
 * its scope changes from `before` to `after` (empty: `after` applies wherever `before` did).
 */
export const scopeDropped = (before: ReadonlyArray<string>, after: ReadonlyArray<string>): ReadonlyArray<string> => before.filter((p) => !patternCovered(p, after))
