// Rebuilds and re-signs every plugin under plugins/ with the development signer:
//   npx tsx plugin-sdk/tools/buildAll.ts

import { existsSync } from "node:fs"
import { join } from "node:path"
import { Effect } from "effect"
import { findPluginSources } from "./Sources.js"
import { buildPlugin, readKeyFile, repoRoot, signPlugin } from "./Build.js"

const program = Effect.gen(function* () {
  const key = yield* readKeyFile(join(repoRoot, "plugins", "dev-signer.key.json"))
  for (const dir of findPluginSources(join(repoRoot, "plugins"))) {
    const { sha256 } = yield* buildPlugin(dir)
    if (existsSync(join(dir, "plugin.json"))) yield* signPlugin(dir, key)
    console.log(`${sha256}  ${dir.slice(repoRoot.length)}`)
  }
})

Effect.runPromise(program).catch((e) => {
  console.error(e instanceof Error ? e.message : e)
  process.exit(1)
})
