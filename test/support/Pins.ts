import { readFileSync } from "node:fs"
import { join } from "node:path"
import { repoRoot } from "../../runtime/cli/Paths.js"
import type { PluginPin } from "../../runtime/schema/PluginPin.js"

/** A pin for a committed plugin (plugins/<dir>), from its signed manifest. */
export const pinOf = (dir: string, fields: Partial<PluginPin> & Pick<PluginPin, "stages">): PluginPin => {
  const m = JSON.parse(readFileSync(join(repoRoot, "plugins", dir, "manifest.json"), "utf8")) as { manifest: { name: string; version: string; sha256: string }; signer: string }
  return { name: m.manifest.name, version: m.manifest.version, sha256: m.manifest.sha256, signer: m.signer, timeout_ms: 50, memory_max_pages: 16, fallback: "DENY", ...fields } as PluginPin
}
