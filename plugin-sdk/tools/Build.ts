// Build and sign plugins. A plugin folder holds `plugin.ts` (source), `plugin.json` (the manifest
// template: name, version, stages, capabilities, egress), and after a build `plugin.wasm` and
// `manifest.json` (signed). asc runs with fixed flags from the repository root, so the same
// source always gives the same bytes, and ed25519 is deterministic, so the same key gives the
// same signed manifest.
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { relative, resolve } from "node:path"
import { Effect, Either, Schema } from "effect"
import { repoRoot as packageRoot } from "../../runtime/cli/Paths.js"
import { sha256Hex } from "../../runtime/schema/Canonical.js"
import { ManifestTemplate, type PluginManifest, SignedManifest } from "../../runtime/schema/PluginManifest.js"
import { PluginToolError } from "../../runtime/plugins/PluginError.js"
import { KeyFile, signManifest } from "../../runtime/plugins/Signing.js"

/** The repository root, with a trailing slash: asc resolves the SDK and abort handler paths from here. */
export const repoRoot = `${packageRoot}/`

/** The only asc flags a plugin is built with. */
export const AscFlags: ReadonlyArray<string> = ["--optimize", "--runtime", "incremental", "--use", "abort=plugin-sdk/assembly/host/sdkAbort", "--noColors"]

const toolError = (command: string, detail: string, cause?: unknown) => new PluginToolError({ command, detail, cause })

/** Compiles `<dir>/plugin.ts` to wasm bytes (does not write them). */
export const compilePlugin = (dir: string): Effect.Effect<Uint8Array, PluginToolError> =>
  Effect.tryPromise({
    try: async () => {
      const asc = (await import("assemblyscript/asc")).default
      const rel = relative(repoRoot, resolve(dir)).split("\\").join("/")
      let binary: Uint8Array | undefined
      const stderr: string[] = []
      const { error } = await asc.main([`${rel}/plugin.ts`, "--outFile", `${rel}/plugin.wasm`, ...AscFlags, "--baseDir", repoRoot], {
        writeFile: (name, contents) => {
          if (name.endsWith(".wasm") && typeof contents !== "string") binary = contents
        },
        stderr: { write: (chunk: Uint8Array | string) => { stderr.push(typeof chunk === "string" ? chunk : new TextDecoder().decode(chunk)); return true } } as never,
        stdout: { write: () => true } as never
      })
      if (error !== null) throw new Error(`${error.message}\n${stderr.join("")}`)
      if (binary === undefined) throw new Error("asc produced no wasm")
      return new Uint8Array(binary)
    },
    catch: (e) => toolError("plugin build", `asc failed for ${dir}: ${e instanceof Error ? e.message : String(e)}`, e)
  })

/** Builds `<dir>/plugin.wasm`; returns its sha256. */
export const buildPlugin = (dir: string): Effect.Effect<{ readonly sha256: string; readonly bytes: Uint8Array }, PluginToolError> =>
  compilePlugin(dir).pipe(
    Effect.tap((bytes) => Effect.try({ try: () => writeFileSync(resolve(dir, "plugin.wasm"), bytes), catch: (e) => toolError("plugin build", `cannot write ${dir}/plugin.wasm`, e) })),
    Effect.map((bytes) => ({ sha256: sha256Hex(bytes), bytes }))
  )

const readJson = <A, I>(command: string, path: string, schema: Schema.Schema<A, I>): Effect.Effect<A, PluginToolError> =>
  Effect.try({ try: () => readFileSync(path, "utf8"), catch: (e) => toolError(command, `cannot read ${path}`, e) }).pipe(
    Effect.flatMap((text) => {
      const r = Schema.decodeUnknownEither(Schema.parseJson(schema))(text)
      return Either.isRight(r) ? Effect.succeed(r.right) : Effect.fail(toolError(command, `${path} is not valid: ${r.left.message}`))
    })
  )

/** Reads a key file written by `wk keygen`. */
export const readKeyFile = (path: string): Effect.Effect<KeyFile, PluginToolError> => readJson("keygen", path, KeyFile)

/** The manifest of a built plugin: its template plus the sha256 of its wasm. */
export const manifestOf = (dir: string): Effect.Effect<PluginManifest, PluginToolError> =>
  Effect.gen(function* () {
    const template = yield* readJson("plugin sign", resolve(dir, "plugin.json"), ManifestTemplate)
    const wasm = resolve(dir, "plugin.wasm")
    if (!existsSync(wasm)) return yield* Effect.fail(toolError("plugin sign", `${wasm} does not exist: run wk plugin build first`))
    const bytes = readFileSync(wasm)
    return { name: template.name, version: template.version, sha256: sha256Hex(bytes), stages: template.stages, capabilities: template.capabilities, egress: template.egress }
  })

/** Signs `<dir>` (manifest of its current wasm) and writes `<dir>/manifest.json`. */
export const signPlugin = (dir: string, key: KeyFile): Effect.Effect<SignedManifest, PluginToolError> =>
  manifestOf(dir).pipe(
    Effect.map((m) => signManifest(m, key)),
    Effect.tap((signed) => Effect.try({ try: () => writeFileSync(resolve(dir, "manifest.json"), JSON.stringify(signed, null, 2) + "\n"), catch: (e) => toolError("plugin sign", `cannot write ${dir}/manifest.json`, e) }))
  )

/** Reads `<dir>/manifest.json`. */
export const readSignedManifest = (dir: string): Effect.Effect<SignedManifest, PluginToolError> => readJson("plugin verify", resolve(dir, "manifest.json"), SignedManifest)
