// The `wk` bundles: runtime/cli/main.ts (the dispatcher) and the command modules it loads, as
// minified CommonJS files in build/cli/, which runtime/cli/wk.mjs runs with a V8 code cache. Why:
// loading the compiled modules one by one is most of a command's start (the `effect` entry point
// alone loads hundreds of modules and fast-check); a bundle holds only the code the CLI reaches,
// and a command's later starts reuse the bytecode its first start compiled. Commands stay lazy
// inside a bundle (each dynamic import is a function that runs the module the first time it is
// called). `npm run build` runs this after tsc; docs/performance.md has the figures.
import { build } from "esbuild"
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..")
// The build folder: build/ of this package, or the folder given (where tsc --outDir wrote, for an image's layout).
const buildDir = process.argv[2] ?? join(root, "build")
const out = join(buildDir, "cli")

// Packages that start worker threads from their own files, load native or optional modules, or
// are ESM only and loaded with import() (assemblyscript, for `wk plugin build`): loaded from
// node_modules as they are, never copied into the bundle.
const external = ["@extism/extism", "pino", "pg", "assemblyscript", "assemblyscript/*", "playwright-core", "tsx", "tsx/*"]

/**
 * `new URL("./worker.mjs", import.meta.url)` names a file beside its module; inside the bundle it
 * must name the compiled copy tsc wrote under build/runtime/ (workers run as their own modules).
 */
const workersBesideTheirModules = {
  name: "workers-beside-their-modules",
  setup(b) {
    b.onLoad({ filter: /[\\/]runtime[\\/].*\.ts$/ }, (args) => {
      const source = readFileSync(args.path, "utf8")
      if (!/new URL\("\.\/[^"]+", import\.meta\.url\)/.test(source)) return undefined
      const dir = relative(out, join(buildDir, relative(root, dirname(args.path)))).split("\\").join("/")
      return { contents: source.replace(/new URL\("\.\/([^"]+)", import\.meta\.url\)/g, (_m, file) => `new URL("${dir}/${file}", import.meta.url)`), loader: "ts" }
    })
  }
}

/**
 * @effect/cli parses YAML, TOML and INI files for `Options.fileParse`, which no command uses; its
 * parsers would be evaluated on every start. Each is replaced by one that says it is not there.
 */
const cliFileParsersLeftOut = {
  name: "cli-file-parsers-left-out",
  setup(b) {
    b.onResolve({ filter: /^(yaml|toml|ini)$/ }, (args) => (/[\\/]@effect[\\/]cli[\\/]/.test(args.importer) ? { path: args.path, namespace: "left-out" } : undefined))
    b.onLoad({ filter: /.*/, namespace: "left-out" }, (args) => ({
      contents: `export const parse = () => { throw new Error("wk: parsing ${args.path} files is not part of the wk bundle") }`,
      loader: "js"
    }))
  }
}

/** The command modules main.ts names in its registry. */
const commandModules = [...new Set([...readFileSync(join(root, "runtime", "cli", "main.ts"), "utf8").matchAll(/module: "(\w+)"/g)].map((m) => m[1]))]

/**
 * The bundles a command is run from. Each holds Run.ts and its modules, so a command and its
 * runner share one copy of effect; the loader in wk.mjs runs the smallest bundle that holds every
 * module a command line needs. `client` holds the short commands an agent, a witness or an
 * operator types (no kernel, gateway, plugin host or MCP server inside, so it starts faster);
 * `all` holds every module (the servers, and `--completions`, which loads every command).
 */
const clientModules = ["ProposeCommand", "HeldCommands", "WitnessCommands", "StandingCommands", "EventsCommand", "StatusCommand", "ProfileCommands", "DevKeyCommand", "ContextCommands", "NatsUsers", "ProvisionCommand"]
const groups = [
  { file: "client.cjs", modules: clientModules.filter((m) => commandModules.includes(m)) },
  { file: "all.cjs", modules: commandModules }
]

const common = {
  bundle: true,
  format: "cjs",
  platform: "node",
  target: "node20",
  minify: process.env["WK_BUNDLE_PLAIN"] !== "1",
  keepNames: true,
  legalComments: "none",
  logLevel: "warning",
  external,
  // import.meta.url of every bundled module is the bundle's own URL (module paths that walk up to
  // package.json, and the worker URLs above, are written for that).
  define: { "import.meta.url": "__wkBundleUrl" },
  banner: { js: "const __wkBundleUrl = require(\"node:url\").pathToFileURL(__filename).href;" },
  plugins: [workersBesideTheirModules, cliFileParsersLeftOut]
}

/**
 * Every `import(` in a bundle becomes `__wkImport(`, the function runtime/cli/wk.mjs passes in: a
 * script Node compiles from a code cache has no dynamic-import callback, so a bare `import()` of an
 * external (`http` for the OTLP exporter, the AssemblyScript compiler) would fail on every start
 * after the first. A string that spells `import(` changes too, which no code path depends on.
 */
const dynamicImportsThroughLoader = (file) => writeFileSync(file, readFileSync(file, "utf8").replace(/(?<![\w$.])import\(/g, "__wkImport("))

rmSync(out, { recursive: true, force: true })
// The dispatcher: root help, usage errors and global options, without effect.
await build({ ...common, entryPoints: [join(root, "runtime", "cli", "main.ts")], outfile: join(out, "wk.cjs") })
dynamicImportsThroughLoader(join(out, "wk.cjs"))
for (const g of groups) {
  const cli = join(root, "runtime", "cli")
  const contents = [
    "export const modules = {",
    ...g.modules.map((m) => `  ${m}: () => import(${JSON.stringify(join(cli, `${m}.ts`))}),`),
    "}",
    `export const run = () => import(${JSON.stringify(join(cli, "Run.ts"))})`
  ].join("\n")
  const result = await build({ ...common, metafile: true, stdin: { contents, resolveDir: cli, sourcefile: g.file.replace(/\.cjs$/, ".entry.js"), loader: "js" }, outfile: join(out, g.file) })
  dynamicImportsThroughLoader(join(out, g.file))
  // WK_BUNDLE_META=1 keeps esbuild's account of what each bundle holds (for `esbuild --analyze`-style reading).
  if (process.env["WK_BUNDLE_META"] === "1") writeFileSync(join(out, `${g.file}.meta.json`), JSON.stringify(result.metafile))
}
mkdirSync(out, { recursive: true })
writeFileSync(join(out, "groups.json"), JSON.stringify(groups, null, 2) + "\n")

// The sources these bundles were built from, and their folders: runtime/cli/wk.mjs compares their
// times with the bundle's to run the sources instead of a stale bundle, by a stat of each (walking
// the folders at every start costs most of a `node -e 0`).
const sources = { dirs: [], files: [] }
for (const dir of ["runtime", join("plugin-sdk", "tools")]) {
  sources.dirs.push(dir)
  for (const f of readdirSync(join(root, dir), { recursive: true })) {
    const path = join(dir, f)
    if (statSync(join(root, path)).isDirectory()) sources.dirs.push(path)
    else if (/\.(ts|mjs)$/.test(f)) sources.files.push(path)
  }
}
writeFileSync(join(out, "sources.json"), JSON.stringify(sources) + "\n")
