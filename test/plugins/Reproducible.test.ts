// Built wasm and signed manifests are committed; rebuilding from source must give the same bytes,
// and re-signing the same manifest with the same key the same signature (ed25519 is deterministic).
import { readFileSync } from "node:fs"
import { join, relative } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { compilePlugin, manifestOf } from "../../plugin-sdk/tools/Build.js"
import { findPluginSources } from "../../plugin-sdk/tools/Sources.js"
import { sha256Hex } from "../../runtime/schema/Canonical.js"
import { SignedManifest } from "../../runtime/schema/PluginManifest.js"
import { signManifest } from "../../runtime/plugins/Signing.js"
import { devKey, pluginsRoot, repoRoot } from "./support.js"

// One test per plugin: a compile blocks the worker for seconds, and vitest's worker must answer
// its runner within a minute (a single test rebuilding every plugin ran past that under load).
const dirs = findPluginSources(pluginsRoot)

describe("reproducible builds", () => {
  it("finds every plugin under plugins/", () => {
    expect(dirs.length).toBeGreaterThanOrEqual(15)
  })

  for (const dir of dirs) {
    const name = relative(repoRoot, dir)
    it.effect(
      `${name} rebuilds to its committed wasm, and its manifest re-signs identically`,
      () =>
        Effect.gen(function* () {
          const committed = new Uint8Array(readFileSync(join(dir, "plugin.wasm")))
          const rebuilt = yield* compilePlugin(dir)
          expect(sha256Hex(rebuilt), `${name} rebuilds to the committed bytes`).toBe(sha256Hex(committed))
          const signed = Schema.decodeUnknownSync(Schema.parseJson(SignedManifest))(readFileSync(join(dir, "manifest.json"), "utf8"))
          const manifest = yield* manifestOf(dir)
          expect(signed.manifest, `${name} manifest matches plugin.json + wasm digest`).toEqual(manifest)
          expect(signManifest(manifest, devKey), `${name} re-signs identically`).toEqual(signed)
        }),
      120_000
    )
  }
})
