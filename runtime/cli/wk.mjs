#!/usr/bin/env node
// The `wk` binary. It runs the compiled CLI in build/ (written by `npm run build`, which `npm ci`
// and `npm install` run as the `prepare` step). When a source under runtime/ or plugin-sdk/tools/
// is newer than that build, or there is no build, it runs the TypeScript sources through tsx
// instead, so a checkout being edited never runs stale code. Everything here resolves from this
// file's own location, never from the current directory, so `wk` works from any folder.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..")
const argv = process.argv.slice(2)

// `wk --version` answers from package.json without loading the CLI.
if (argv.length === 1 && (argv[0] === "--version" || argv[0] === "-V")) {
  process.stdout.write(`${JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version}\n`)
  process.exit(0)
}

/** The newest modification time of the TypeScript and JavaScript sources the build compiles. */
const newestSource = () => {
  let newest = 0
  for (const dir of ["runtime", join("plugin-sdk", "tools")]) {
    for (const f of readdirSync(join(root, dir), { recursive: true })) {
      if (/\.(ts|mjs)$/.test(f)) newest = Math.max(newest, statSync(join(root, dir, f)).mtimeMs)
    }
  }
  return newest
}

const built = join(root, "build", "runtime", "cli", "main.js")
const fresh = existsSync(built) && statSync(built).mtimeMs >= newestSource()

// The plugin host uses WASI, which Node flags as experimental on every start: not the user's concern.
process.removeAllListeners("warning")
process.on("warning", (w) => {
  if (w.name !== "ExperimentalWarning") process.stderr.write(`${w.name}: ${w.message}\n`)
})

if (fresh) await import(pathToFileURL(built).href)
else {
  const { register } = await import("tsx/esm/api")
  register()
  await import(pathToFileURL(join(root, "runtime", "cli", "main.ts")).href)
}
