import { Schema } from "effect"

/** The stages a plugin can declare; each is also the name of the wasm export the kernel calls. */
export const Stage = Schema.Literal("transform", "adjudicate", "witness_contract", "admit", "observe")
export type Stage = typeof Stage.Type

/** Host functions by capability name; each maps to one `extism:host/user` import. */
export const HostCapability = Schema.Literal("log", "clock", "kv", "counter", "publish")
export type HostCapability = typeof HostCapability.Type

/** The `extism:host/user` import each capability links. */
export const HostImportOf: Readonly<Record<HostCapability, string>> = {
  log: "wk_log",
  clock: "wk_now",
  kv: "wk_kv_get",
  counter: "wk_counter",
  publish: "wk_publish"
}

/**
 * A publish prefix: NATS tokens ending in a dot, e.g. `wk.notify.`. Protocol subjects (`wk.v1.`),
 * JetStream/system subjects (`$`) and reply inboxes are never grantable: a plugin that could
 * publish there could forge wakes, witness requests or replies.
 */
export const PublishPrefix = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\.$/, { message: () => "a publish prefix is dot-separated tokens of [A-Za-z0-9_-] ending in '.', e.g. 'wk.notify.'" }),
  Schema.filter((p) => (!p.startsWith("wk.v1.") && !p.startsWith("_INBOX")) || "a publish prefix may not be under the protocol's wk.v1. or any reply inbox (_INBOX)")
)

/** Host capabilities: which functions, which KV prefix, which counters. Requested in a manifest, granted in a pin. */
export const Capabilities = Schema.Struct({
  host_functions: Schema.Array(HostCapability),
  /** Keys a `kv` plugin may read start with this prefix. */
  kv_prefix: Schema.optional(Schema.String.pipe(Schema.minLength(1))),
  /** Counter names a `counter` plugin may read. */
  counters: Schema.optional(Schema.Array(Schema.String.pipe(Schema.minLength(1)))),
  /** Subjects a `publish` plugin may publish to start with this prefix (never the protocol's `wk.v1.`). */
  publish_prefix: Schema.optional(PublishPrefix)
})
export type Capabilities = typeof Capabilities.Type

/**
 * Data egress class: where data a plugin sees may end up. `none`: only its verdict leaves it;
 * `kernel`: it may write kernel logs; `external`: it may hand data to an outside sink.
 */
export const Egress = Schema.Literal("none", "kernel", "external")
export type Egress = typeof Egress.Type
export const EgressRank: Readonly<Record<Egress, number>> = { none: 0, kernel: 1, external: 2 }

export const PluginName = Schema.String.pipe(Schema.pattern(/^[a-z0-9][a-z0-9._-]{0,63}$/, { message: () => "plugin names are lowercase [a-z0-9._-], at most 64 chars" }))
export const Sha256Hex = Schema.String.pipe(Schema.pattern(/^[0-9a-f]{64}$/, { message: () => "expected a lowercase hex sha256" }))
export const PublicKey = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9+/]{43}=$/, { message: () => "expected a base64 ed25519 public key (32 bytes)" }))

/** What the author signs: the JCS of exactly these fields. */
export const PluginManifest = Schema.Struct({
  name: PluginName,
  version: Schema.String.pipe(Schema.minLength(1)),
  sha256: Sha256Hex,
  stages: Schema.Array(Stage).pipe(Schema.minItems(1)),
  capabilities: Capabilities,
  egress: Egress
})
export type PluginManifest = typeof PluginManifest.Type

/** The manifest file beside a plugin's wasm (`manifest.json`). Unsigned files have no signer/signature. */
export const SignedManifest = Schema.Struct({
  manifest: PluginManifest,
  signer: Schema.optional(PublicKey),
  /** base64 ed25519 signature over the UTF-8 JCS of `manifest`. */
  signature: Schema.optional(Schema.String)
})
export type SignedManifest = typeof SignedManifest.Type

/** The unsigned template an author keeps beside the source (`plugin.json`): the manifest minus the digest. */
export const ManifestTemplate = PluginManifest.pipe(Schema.omit("sha256"))
export type ManifestTemplate = typeof ManifestTemplate.Type
