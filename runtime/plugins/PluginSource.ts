import { readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { Context, Effect, Either, Layer, Schema } from "effect"
import { sha256Hex } from "../schema/Canonical.js"
import { SignedManifest } from "../schema/PluginManifest.js"

/** A plugin's wasm bytes and the signed manifest stored beside them. */
export interface PluginArtifact {
  readonly bytes: Uint8Array
  readonly manifest: SignedManifest | undefined
}

/** The store had no artifact for a digest, or could not be read. */
export class PluginSourceError extends Schema.TaggedError<PluginSourceError>()("PluginSourceError", {
  sha256: Schema.String,
  detail: Schema.String
}) {}

/** Where the host gets plugin bytes by digest: a local folder, memory, or the JetStream object store. */
export class PluginSource extends Context.Tag("wk/PluginSource")<
  PluginSource,
  { readonly fetch: (sha256: string) => Effect.Effect<PluginArtifact, PluginSourceError> }
>() {}

/** Artifacts held in memory. `sha256` defaults to the digest of `bytes`; tests set it to plant tampered bytes. */
export const layerPluginSourceMemory = (entries: ReadonlyArray<PluginArtifact & { readonly sha256?: string }>) => {
  const byDigest = new Map(entries.map((e) => [e.sha256 ?? sha256Hex(e.bytes), { bytes: e.bytes, manifest: e.manifest }]))
  return Layer.succeed(PluginSource, {
    fetch: (sha256) => {
      const hit = byDigest.get(sha256)
      return hit === undefined ? Effect.fail(new PluginSourceError({ sha256, detail: "no plugin with this digest in memory" })) : Effect.succeed(hit)
    }
  })
}

const decodeManifest = Schema.decodeUnknownEither(Schema.parseJson(SignedManifest))

/** Reads one plugin folder: `plugin.wasm` and, when present, `manifest.json`. */
export const readPluginDir = (dir: string): PluginArtifact => {
  const bytes = new Uint8Array(readFileSync(join(dir, "plugin.wasm")))
  let manifest: SignedManifest | undefined
  try {
    const m = decodeManifest(readFileSync(join(dir, "manifest.json"), "utf8"))
    manifest = Either.isRight(m) ? m.right : undefined
  } catch {
    manifest = undefined
  }
  return { bytes, manifest }
}

/** Every folder under `root` that holds a `plugin.wasm`. */
export const findPluginDirs = (root: string): ReadonlyArray<string> => {
  const out: string[] = []
  const walk = (dir: string) => {
    const names = readdirSync(dir)
    if (names.includes("plugin.wasm")) out.push(dir)
    for (const n of names) {
      if (n === "node_modules" || n.startsWith(".")) continue
      const p = join(dir, n)
      if (statSync(p).isDirectory()) walk(p)
    }
  }
  walk(root)
  return out.sort()
}

/** Plugins from a folder tree (such as `plugins/`), indexed by the digest of their wasm. */
export const layerPluginSourceDir = (root: string) =>
  Layer.effect(
    PluginSource,
    Effect.sync(() => {
      const byDigest = new Map<string, PluginArtifact>()
      for (const dir of findPluginDirs(root)) {
        const a = readPluginDir(dir)
        byDigest.set(sha256Hex(a.bytes), a)
      }
      return {
        fetch: (sha256: string) => {
          const hit = byDigest.get(sha256)
          return hit === undefined ? Effect.fail(new PluginSourceError({ sha256, detail: `no plugin with this digest under ${root}` })) : Effect.succeed(hit)
        }
      }
    })
  )
