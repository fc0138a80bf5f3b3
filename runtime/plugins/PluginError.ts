import { Schema } from "effect"

/** Why a pinned plugin refused to load. */
export const LoadProblem = Schema.Literal(
  "not_found",
  "digest_mismatch",
  "unsigned",
  "unknown_signer",
  "bad_signature",
  "manifest_mismatch",
  "stage_not_declared",
  "capability_not_requested",
  "egress_exceeds",
  "invalid_wasm",
  "memory_limit",
  "ungranted_import",
  "missing_export",
  "instantiate_failed"
)
export type LoadProblem = typeof LoadProblem.Type

/** A pinned plugin refused to load: one error naming the plugin, its digest and the reason. */
export class PluginLoadError extends Schema.TaggedError<PluginLoadError>()("PluginLoadError", {
  plugin: Schema.String,
  sha256: Schema.String,
  problem: LoadProblem,
  detail: Schema.String
}) {
  override get message(): string {
    return `plugin ${this.plugin} (sha256 ${this.sha256.slice(0, 12)}…) refused to load: ${this.problem}: ${this.detail}`
  }
}

/** A re-run of a recorded decision could not start (wrong bytes, no input). */
export class RerunError extends Schema.TaggedError<RerunError>()("RerunError", {
  plugin: Schema.String,
  detail: Schema.String
}) {
  override get message(): string {
    return `cannot re-run decision of ${this.plugin}: ${this.detail}`
  }
}

/** A plugin tool command failed (build, sign, verify). */
export class PluginToolError extends Schema.TaggedError<PluginToolError>()("PluginToolError", {
  command: Schema.String,
  detail: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {
  override get message(): string {
    return `${this.command}: ${this.detail}`
  }
}
