// Cost of one plugin stage with limits enforced, against a bare in-process Extism call of the
// same wasm and against the same logic as a plain JavaScript function, measured in one run.
// (The SDK's own runInWorker mode is not measured here: its worker does not start under tsx,
// and its timeout does not stop a loop anyway; toolchain.md measured it at p50 195 us.)
//   npx tsx bench/plugin-stage.ts
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import createPlugin from "@extism/extism"
import { Effect, Either, Layer, Schema } from "effect"
import { activePolicy } from "../runtime/policy/ActivePolicy.js"
import type { Proposal } from "../runtime/policy/Adjudicator.js"
import { adjudicateByRule } from "../runtime/policy/RuleAdjudicator.js"
import { canonicalize } from "../runtime/schema/Canonical.js"
import type { JsonValue } from "../runtime/schema/Json.js"
import { grantedHostHandler, layerHostEnvMemory, PluginHostEnv } from "../runtime/plugins/HostEnv.js"
import { SignedManifest } from "../runtime/schema/PluginManifest.js"
import { layerPluginHost, PluginHost } from "../runtime/plugins/PluginHost.js"
import type { PluginPin } from "../runtime/schema/PluginPin.js"
import { layerPluginSourceMemory } from "../runtime/plugins/PluginSource.js"
import { adjudicateWithPlugins } from "../runtime/plugins/Pipeline.js"
import { AdjudicateOutput } from "../runtime/schema/StageIO.js"
import { FuelExport, meterModule } from "../runtime/plugins/internal/wasmMeter.js"
import { measureAll, printTable, row, type Row } from "./Table.js"

const root = fileURLToPath(new URL("..", import.meta.url))
const dir = join(root, "plugins", "spend-limit")
const bytes = new Uint8Array(readFileSync(join(dir, "plugin.wasm")))
const signed = Schema.decodeUnknownSync(Schema.parseJson(SignedManifest))(readFileSync(join(dir, "manifest.json"), "utf8"))

const rules = { "payments.transfer": { amount_field: "amount", witness_above: 100, deny_above: 10_000 } }
const pin: PluginPin = {
  name: "spend-limit",
  version: signed.manifest.version,
  sha256: signed.manifest.sha256,
  signer: signed.signer!,
  stages: ["adjudicate"],
  timeout_ms: 200,
  memory_max_pages: 16,
  config: { rules }
}
const proposal: Proposal = { principal: "alice", session_id: "s-bench", turn_id: "t1", call_id: "c1", tool: "payments.transfer", args: { amount: 120, to: "bob", memo: "invoice 2026-0042 for consulting, november" } }
const Now = 1_767_000_000_000
const stageInput: JsonValue = { stage: "adjudicate", proposal: { ...proposal }, config: { rules }, now: Now }
const inputText = canonicalize(stageInput)
const policy = activePolicy(1, [{ name: "bench", grants: { alice: ["payments.transfer"] }, rules, plugins: [pin] }])

/** The table rows: plain JS, bare Extism in-process, plugin stage with limits, and context. */
export const runPluginStageBench = async (runs = Number(process.env["WK_BENCH_RUNS"] ?? 7), n = Number(process.env["WK_BENCH_CALLS"] ?? 2000)): Promise<Array<Row>> => {
  // Bare in-process Extism: no limits at all. reset() drops the call's blocks; without it the SDK
  // runs out of block addresses after ~32k calls.
  const bare = await createPlugin({ wasm: [{ data: bytes }] }, { useWasi: false })
  // The same bare call of the fuel-metered module: what the instrumentation alone costs.
  const metered = meterModule(bytes)
  if (!metered.ok) throw new Error(metered.detail)
  const meteredPlugin = await createPlugin({ wasm: [{ data: new Uint8Array(metered.bytes) }] }, { useWasi: false })
  const fuel = (await meteredPlugin.getInstance()).exports[FuelExport] as WebAssembly.Global

  const host = Layer.mergeAll(layerPluginHost.pipe(Layer.provide(layerPluginSourceMemory([{ bytes, manifest: signed }]))), layerHostEnvMemory())
  const figures = await Effect.runPromise(
    Effect.gen(function* () {
      const h = yield* PluginHost
      const env = yield* PluginHostEnv
      const decode = Schema.decodeUnknownEither(AdjudicateOutput)
      // One stage: JCS + sha256 of the input, the call under the time and memory limits, and
      // decoding the output against the stage schema.
      const stageOf = (p: PluginPin) =>
        Effect.gen(function* () {
          const loaded = yield* h.load(p)
          const handler = grantedHostHandler(loaded.pin, { principal: "alice", now: Now }, env)
          const stage = Effect.gen(function* () {
            const inv = yield* h.invoke(loaded, "adjudicate", stageInput, handler)
            if (inv.raw.status !== "ok" || Either.isLeft(decode(JSON.parse(inv.raw.text)))) throw new Error(`stage failed: ${inv.raw.status} ${inv.raw.text}`)
          })
          return () => Effect.runPromise(stage)
        })
      const meteredStage = yield* stageOf(pin)
      const workerStage = yield* stageOf({ ...pin, isolation: "worker" })
      const ctx = yield* Effect.context<PluginHost | PluginHostEnv>()
      const full = adjudicateWithPlugins({ proposal, policy, now: Now }).pipe(Effect.provide(ctx))
      return yield* Effect.promise(() =>
        measureAll(runs, n, [
          // Plain JS: the spine's rule adjudicator on the same proposal.
          () => adjudicateByRule({ proposal, policy, now: Now }),
          async () => {
            const out = await bare.call("adjudicate", inputText)
            JSON.parse(out!.text())
            await bare.reset()
          },
          async () => {
            fuel.value = 1_000_000_000n
            const out = await meteredPlugin.call("adjudicate", inputText)
            JSON.parse(out!.text())
            await meteredPlugin.reset()
          },
          meteredStage,
          workerStage,
          () => Effect.runPromise(full)
        ])
      )
    }).pipe(Effect.scoped, Effect.provide(host))
  )
  await bare.close()
  await meteredPlugin.close()
  const [js, bareUs, bareMeteredUs, meteredUs, workerUs, pipelineUs] = figures as [number, number, number, number, number, number]

  return [
    row("plain JS rule adjudicator", js, js, "us/call"),
    row("bare in-process Extism call (no limits)", bareUs, js, "us/call"),
    row("bare in-process Extism call, fuel-metered wasm", bareMeteredUs, bareUs, "us/call"),
    row("plugin stage, limits enforced (in-process, fuel metered; default)", meteredUs, bareUs, "us/call", "<= 3x bare Extism"),
    row("plugin stage vs plain JS", meteredUs, js, "us/call"),
    row("plugin stage, limits enforced (own worker, terminate on timeout)", workerUs, bareUs, "us/call"),
    row("full plugin adjudication, 1 plugin (decisions, fold)", pipelineUs, bareUs, "us/call")
  ]
}

if (import.meta.url === `file://${process.argv[1]}`) {
  runPluginStageBench().then(
    (rows) => {
      printTable(rows)
      const get = (prefix: string) => rows.find((r) => r.figure.startsWith(prefix))!
      console.log(
        `\nplugin stage (default, fuel-metered) = ${get("plugin stage, limits enforced (in-process").ratio}x a bare Extism call, ${get("plugin stage vs").ratio}x a plain JS function; ` +
          `worker isolation = ${get("plugin stage, limits enforced (own worker").ratio}x bare (per-call medians, median of ${process.env["WK_BENCH_RUNS"] ?? 7} interleaved runs)`
      )
      process.exit(0)
    },
    (e) => {
      console.error(e)
      process.exit(1)
    }
  )
}
