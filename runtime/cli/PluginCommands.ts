import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Either, Option } from "effect"
import { buildPlugin, readKeyFile, readSignedManifest, signPlugin } from "../../plugin-sdk/tools/Build.js"
import { sha256Hex } from "../schema/Canonical.js"
import { PluginToolError } from "../plugins/PluginError.js"
import type { PluginPin } from "../schema/PluginPin.js"
import { generateKey, verifySignature } from "../plugins/Signing.js"

const dirArg = Args.directory({ name: "plugin-dir", exists: "yes" }).pipe(Args.withDescription("folder with plugin.ts and plugin.json"))
const fail = (command: string, detail: string) => Effect.fail(new PluginToolError({ command, detail }))
const json = Options.boolean("json").pipe(Options.withDescription("print the outcome as JSON"))
/** Prints `data` as JSON with --json, else the text line. */
const report = (asJson: boolean, text: string, data: Record<string, unknown>) => Console.log(asJson ? JSON.stringify(data, null, 2) : text)

/** `wk keygen --out <file>`: writes a new ed25519 signing key (mode 0600). */
export const keygenCommand = Command.make("keygen", { out: Options.file("out").pipe(Options.withDescription("key file to write")), force: Options.boolean("force").pipe(Options.withDescription("replace an existing key file")), json }, ({ out, force, json }) =>
  Effect.gen(function* () {
    if (existsSync(out) && !force) return yield* fail("keygen", `${out} exists (use --force to replace it)`)
    const key = generateKey()
    yield* Effect.try({ try: () => writeFileSync(out, JSON.stringify(key, null, 2) + "\n", { mode: 0o600 }), catch: (cause) => new PluginToolError({ command: "keygen", detail: `cannot write ${out}`, cause }) })
    yield* report(json, `wrote ${out}\npublic key (pin this as the plugin signer): ${key.public_key}`, { file: out, public_key: key.public_key })
  })
).pipe(Command.withDescription("Generate an ed25519 plugin signing key"))

const buildCommand = Command.make("build", { dir: dirArg, json }, ({ dir, json }) =>
  buildPlugin(dir).pipe(Effect.flatMap(({ sha256, bytes }) => report(json, `${join(dir, "plugin.wasm")}  ${bytes.length} bytes  sha256 ${sha256}`, { wasm: join(dir, "plugin.wasm"), bytes: bytes.length, sha256 })))
).pipe(Command.withDescription("Compile <plugin-dir>/plugin.ts to plugin.wasm with the SDK's fixed asc flags (reproducible)"))

const signCommand = Command.make("sign", { dir: dirArg, key: Options.file("key", { exists: "yes" }).pipe(Options.withDescription("key file from wk keygen")), json }, ({ dir, key, json }) =>
  Effect.gen(function* () {
    const k = yield* readKeyFile(key)
    const signed = yield* signPlugin(dir, k)
    yield* report(json, `${join(dir, "manifest.json")}  ${signed.manifest.name}@${signed.manifest.version}  sha256 ${signed.manifest.sha256}  signer ${signed.signer}`, { manifest: join(dir, "manifest.json"), name: signed.manifest.name, version: signed.manifest.version, sha256: signed.manifest.sha256, signer: signed.signer })
  })
).pipe(Command.withDescription("Sign the manifest (name, version, wasm sha256, stages, capabilities, egress) with ed25519 over its JCS"))

const signerOption = Options.text("signer").pipe(Options.optional, Options.withDescription("the signer key a profile pins (base64); default: the manifest's own"))

const verifyCommand = Command.make("verify", { dir: dirArg, signer: signerOption, json }, ({ dir, signer, json }) =>
  Effect.gen(function* () {
    const signed = yield* readSignedManifest(dir)
    const digest = sha256Hex(readFileSync(resolve(dir, "plugin.wasm")))
    if (digest !== signed.manifest.sha256) return yield* fail("plugin verify", `plugin.wasm hashes to ${digest}, the manifest names ${signed.manifest.sha256}`)
    const expected = Option.getOrElse(signer, () => signed.signer ?? "")
    const ok = verifySignature(signed, expected)
    if (Either.isLeft(ok)) return yield* fail("plugin verify", `${ok.left.problem}: ${ok.left.detail}`)
    yield* report(json, `ok  ${signed.manifest.name}@${signed.manifest.version}  sha256 ${digest}  signed by ${expected}`, { ok: true, name: signed.manifest.name, version: signed.manifest.version, sha256: digest, signer: expected })
  })
).pipe(Command.withDescription("Check that plugin.wasm matches the signed manifest and the signature verifies"))

const alwaysJson = Options.boolean("json").pipe(Options.withDescription("accepted for uniformity: this command always prints JSON"))

const inspectCommand = Command.make("inspect", { dir: dirArg, json: alwaysJson }, ({ dir }) =>
  Effect.gen(function* () {
    const bytes = readFileSync(resolve(dir, "plugin.wasm"))
    const module = yield* Effect.tryPromise({ try: () => WebAssembly.compile(bytes), catch: (cause) => new PluginToolError({ command: "plugin inspect", detail: "plugin.wasm does not compile", cause }) })
    const signed = yield* Effect.either(readSignedManifest(dir))
    const report = {
      sha256: sha256Hex(bytes),
      bytes: bytes.length,
      manifest: Either.isRight(signed) ? signed.right.manifest : null,
      signer: Either.isRight(signed) ? (signed.right.signer ?? null) : null,
      signature_valid: Either.isRight(signed) && signed.right.signer !== undefined ? Either.isRight(verifySignature(signed.right, signed.right.signer)) : false,
      imports: WebAssembly.Module.imports(module).map((i) => `${i.module}/${i.name} (${i.kind})`),
      exports: WebAssembly.Module.exports(module).map((e) => `${e.name} (${e.kind})`)
    }
    yield* Console.log(JSON.stringify(report, null, 2))
  })
).pipe(Command.withDescription("Show a plugin's digest, manifest, signer, imports and exports"))

const pinCommand = Command.make("pin", { dir: dirArg, signer: signerOption, json: alwaysJson }, ({ dir, signer }) =>
  Effect.gen(function* () {
    const signed = yield* readSignedManifest(dir)
    const m = signed.manifest
    const pin: PluginPin = {
      name: m.name,
      version: m.version,
      sha256: m.sha256,
      signer: Option.getOrElse(signer, () => signed.signer ?? ""),
      stages: m.stages,
      capabilities: m.capabilities,
      egress: m.egress,
      timeout_ms: 50,
      memory_max_pages: 16,
      fallback: "DENY",
      config: {}
    }
    yield* Console.log(JSON.stringify(pin, null, 2))
  })
).pipe(Command.withDescription("Print a profile pin for a signed plugin (grants what the manifest requests; narrow it as needed)"))

/** `wk plugin build|sign|verify|inspect|pin`. */
export const pluginCommand = Command.make("plugin").pipe(
  Command.withDescription("Build, sign, verify and inspect WASM policy plugins"),
  Command.withSubcommands([buildCommand, signCommand, verifyCommand, inspectCommand, pinCommand])
)
