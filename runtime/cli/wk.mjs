#!/usr/bin/env node
// The `wk` binary. It runs the bundled CLI in build/cli/ (runtime/cli/bundleCli.mjs, written by
// `npm run build`, which `npm ci` and `npm install` run as the `prepare` step) through a V8 code
// cache kept beside it, one cache file per command and bundle, so a command's later starts skip
// compiling the code its first start compiled. When a source under runtime/ or plugin-sdk/tools/
// is newer than that bundle, or there is none, it runs the TypeScript sources through tsx instead,
// so a checkout being edited never runs stale code. Everything resolves from this file's own
// location, never from the current directory, so `wk` works from any folder.
import { existsSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync, mkdirSync } from "node:fs"
import { createRequire } from "node:module"
import { basename, dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { Script } from "node:vm"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..")
const argv = process.argv.slice(2)

// `wk --version` answers from package.json without loading the CLI.
if (argv.length === 1 && (argv[0] === "--version" || argv[0] === "-V")) {
  process.stdout.write(`${JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version}\n`)
  process.exit(0)
}

/**
 * The newest modification time of the TypeScript and JavaScript sources the build compiles. The
 * build lists them with their folders (build/cli/sources.json): a stat of each is cheap, while
 * walking the folders costs most of a `node -e 0`. An edited file has a newer time; a file added
 * or removed gives its folder a newer time, and a listed file that is gone counts as newest.
 */
const newestSource = () => {
  let listed
  try {
    listed = JSON.parse(readFileSync(join(root, "build", "cli", "sources.json"), "utf8"))
  } catch {}
  if (listed !== undefined) {
    let newest = 0
    for (const p of [...listed.dirs, ...listed.files]) newest = Math.max(newest, statSync(join(root, p), { throwIfNoEntry: false })?.mtimeMs ?? Infinity)
    return newest
  }
  let newest = 0
  for (const dir of ["runtime", join("plugin-sdk", "tools")]) {
    for (const f of readdirSync(join(root, dir), { recursive: true })) {
      if (/\.(ts|mjs)$/.test(f)) newest = Math.max(newest, statSync(join(root, dir, f)).mtimeMs)
    }
  }
  return newest
}

const bundles = join(root, "build", "cli")
const dispatcher = join(bundles, "wk.cjs")
// Only a checkout (it has .git) is edited; an installed package runs its build without looking.
// WK_CLI_SOURCES=1 runs the TypeScript sources even beside a fresh build: a test that preloads a
// hook into a dependency (node --import) needs the process to load that dependency, not a bundle's copy.
const fresh = process.env.WK_CLI_SOURCES !== "1" && existsSync(dispatcher) && (!existsSync(join(root, ".git")) || statSync(dispatcher).mtimeMs >= newestSource())

// The plugin host uses WASI, which Node flags as experimental on every start: not the user's concern.
process.removeAllListeners("warning")
process.on("warning", (w) => {
  if (w.name !== "ExperimentalWarning") process.stderr.write(`${w.name}: ${w.message}\n`)
})

/**
 * The command a cache file is kept for: the first word that is not an option, past the global
 * options (`--server URL`, `--context NAME`). Each command compiles different code, so each keeps
 * its own cache; the bundle's size and time and this Node's version name the cache, so a rebuilt
 * bundle or another Node never reads bytecode compiled for something else.
 */
const command = (() => {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === "--server" || a === "--context") i++
    else if (!a.startsWith("-")) return /^[a-z][a-z0-9-]{0,30}$/.test(a) ? a : "wk"
  }
  return "wk"
})()

/** Runs a bundle as CommonJS with the command's code cache, writes that cache when it had none, and returns its exports. */
const runBundle = (bundle) => {
  const stat = statSync(bundle)
  const cache = join(bundles, "cache", `${command}-${basename(bundle, ".cjs")}-${stat.size}-${Math.floor(stat.mtimeMs)}-${process.version}-${process.arch}.v8`)
  let cachedData
  try {
    cachedData = readFileSync(cache)
  } catch {}
  const source = readFileSync(bundle, "utf8").replace(/^#!.*/, "")
  // The bundle's dynamic imports call `__wkImport` (runtime/cli/bundleCli.mjs renames them): a
  // script compiled from a code cache loses its dynamic-import callback in Node, and a bare
  // `import()` in it then fails with ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING (the OTLP exporter's
  // `import("http")`, `wk plugin build`'s compiler). This module's own `import()` always works.
  const script = new Script(`(function (exports, require, module, __filename, __dirname, __wkImport) {${source}\n})`, {
    filename: bundle,
    cachedData
  })
  if (cachedData === undefined || script.cachedDataRejected) {
    // Written at exit, so the cache holds the code this command ran, not only the top level. A
    // folder the user cannot write (a global install) just means no cache.
    process.once("exit", () => {
      try {
        mkdirSync(dirname(cache), { recursive: true })
        const temp = `${cache}.${process.pid}`
        writeFileSync(temp, script.createCachedData())
        renameSync(temp, cache)
      } catch {}
    })
  }
  const module = { exports: {} }
  const importBesideBundle = (specifier) => import(specifier.startsWith(".") ? pathToFileURL(join(dirname(bundle), specifier)).href : specifier)
  script.runInThisContext().call(module.exports, module.exports, createRequire(bundle), module, bundle, dirname(bundle), importBesideBundle)
  return module.exports
}

/**
 * The loader main.ts asks for a command's modules: the smallest bundle that holds them all (see
 * runtime/cli/bundleCli.mjs), run once; its modules and Run.ts's runner come from that one bundle.
 */
const loaded = new Map()
// Only a fresh bundle is run: under tsx (no bundle, or one older than the sources) main.ts imports
// the sources themselves, never a stale or missing bundle.
if (fresh) globalThis[Symbol.for("witness-kernel.cli.load")] = async (modules) => {
  const groups = JSON.parse(readFileSync(join(bundles, "groups.json"), "utf8"))
  const group = groups.find((g) => modules.every((m) => g.modules.includes(m)))
  if (group === undefined) throw new Error(`wk: no bundle in ${bundles} holds ${modules.join(", ")} (run \`npm run build\`)`)
  if (!loaded.has(group.file)) loaded.set(group.file, runBundle(join(bundles, group.file)))
  const exports = loaded.get(group.file)
  const [run, ...mods] = await Promise.all([exports.run(), ...modules.map((m) => exports.modules[m]())])
  return { modules: mods, runCommand: run.runCommand }
}

if (fresh) runBundle(dispatcher)
else {
  const tsx = await import("tsx/esm/api").catch(() => undefined)
  if (tsx === undefined) {
    process.stderr.write(`wk: ${bundles} is missing or older than the sources, and tsx (a development dependency) is not installed: run \`npm run build\` in ${root}\n`)
    process.exit(1)
  }
  tsx.register()
  await import(pathToFileURL(join(root, "runtime", "cli", "main.ts")).href)
}
