// Shared setup for the plugin suites: pins for the committed plugins, policies, host layers.
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { Layer } from "effect"
import { activePolicy, type ActivePolicy } from "../../runtime/policy/ActivePolicy.js"
import type { Proposal } from "../../runtime/policy/Adjudicator.js"
import type { Profile } from "../../runtime/schema/Profile.js"
import { layerHostEnvMemory } from "../../runtime/plugins/HostEnv.js"
import type { PluginPin } from "../../runtime/schema/PluginPin.js"
import { layerPluginHost } from "../../runtime/plugins/PluginHost.js"
import { layerPluginSourceDir, readPluginDir, type PluginArtifact } from "../../runtime/plugins/PluginSource.js"
import { layerPlugins } from "../../runtime/plugins/Pipeline.js"
import { KeyFile } from "../../runtime/plugins/Signing.js"
import { Schema } from "effect"

export const repoRoot = join(import.meta.dirname, "..", "..")
export const pluginsRoot = join(repoRoot, "plugins")
export const pluginDir = (name: string): string => join(pluginsRoot, name)

export const devKey: KeyFile = Schema.decodeUnknownSync(Schema.parseJson(KeyFile))(readFileSync(join(pluginsRoot, "dev-signer.key.json"), "utf8"))

export const artifact = (name: string): PluginArtifact => readPluginDir(pluginDir(name))

/** A pin for a committed plugin, granting what its manifest requests, with overrides. */
export const pinOf = (name: string, overrides: Partial<PluginPin> = {}): PluginPin => {
  const m = artifact(name).manifest
  if (m === undefined) throw new Error(`${name} has no manifest`)
  return {
    name: m.manifest.name,
    version: m.manifest.version,
    sha256: m.manifest.sha256,
    signer: devKey.public_key,
    stages: m.manifest.stages,
    capabilities: m.manifest.capabilities,
    egress: m.manifest.egress,
    timeout_ms: 500,
    ...overrides
  }
}

export const alice = "alice"

/** A policy granting alice the given tools, with the given plugin pins. */
export const policyWith = (plugins: ReadonlyArray<PluginPin>, tools: ReadonlyArray<string> = ["payments.transfer", "notes.read", "pay", "search"], extra: Partial<Profile> = {}): ActivePolicy =>
  activePolicy(1, [{ name: "test", layer: "organization", grants: { [alice]: [...tools] }, plugins: [...plugins], ...extra }])

export const proposal = (tool: string, args: Proposal["args"] = {}): Proposal => ({ principal: alice, session_id: "s1", turn_id: "t1", call_id: "c1", tool, args })

export const Now = 1_767_000_000_000

/** The host over plugins/ with in-memory host data. */
export const hostLayer = (hostData: Parameters<typeof layerHostEnvMemory>[0] = {}) =>
  Layer.mergeAll(layerPluginHost.pipe(Layer.provide(layerPluginSourceDir(pluginsRoot))), layerHostEnvMemory(hostData))

/** Adjudicator and Admission over plugins/, plus the host itself. */
export const pipelineLayer = (hostData: Parameters<typeof layerHostEnvMemory>[0] = {}) => layerPlugins(layerPluginSourceDir(pluginsRoot), layerHostEnvMemory(hostData))
