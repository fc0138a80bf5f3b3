import { join } from "node:path"
import { Effect } from "effect"
import { buildPlugin, readKeyFile, repoRoot, signPlugin } from "./Build.js"
const names = process.argv.slice(2)
const program = Effect.gen(function* () {
  const key = yield* readKeyFile(join(repoRoot, "plugins", "dev-signer.key.json"))
  for (const n of names) {
    const dir = join(repoRoot, "plugins", n)
    const { sha256 } = yield* buildPlugin(dir)
    yield* signPlugin(dir, key)
    console.log(`${sha256}  ${n}`)
  }
})
Effect.runPromise(program).catch((e) => { console.error(e instanceof Error ? e.message : e); process.exit(1) })
