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
import { SignedManifest } from "../runtime/plugins/Manifest.js"
import { layerPluginHost, PluginHost } from "../runtime/plugins/PluginHost.js"
import type { PluginPin } from "../runtime/plugins/PluginPin.js"
import { layerPluginSourceMemory } from "../runtime/plugins/PluginSource.js"
import { adjudicateWithPlugins } from "../runtime/plugins/Pipeline.js"
import { AdjudicateOutput } from "../runtime/plugins/StageIO.js"
import { median, printTable, row, type Row } from "./Table.js"

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

/** Mean µs per call of `n` calls, for `runs` runs (after a warm-up run); returns the median run. */
const measure = async (runs: number, n: number, once: () => unknown | Promise<unknown>): Promise<number> => {
  const perRun: number[] = []
  for (let r = 0; r <= runs; r++) {
    const t0 = performance.now()
    for (let i = 0; i < n; i++) await once()
    if (r > 0) perRun.push(((performance.now() - t0) / n) * 1000)
  }
  return median(perRun)
}

/** The table rows: plain JS, bare Extism in-process, plugin stage with limits, and context. */
export const runPluginStageBench = async (runs = Number(process.env["WK_BENCH_RUNS"] ?? 7), n = Number(process.env["WK_BENCH_CALLS"] ?? 3000)): Promise<Array<Row>> => {
  // Plain JS: the spine's rule adjudicator on the same proposal.
  const js = await measure(runs, n * 10, () => adjudicateByRule({ proposal, policy, now: Now }))

  // Bare in-process Extism: no limits at all. reset() drops the call's blocks; without it the SDK
  // runs out of block addresses after ~32k calls.
  const bare = await createPlugin({ wasm: [{ data: bytes }] }, { useWasi: false })
  const bareUs = await measure(runs, n, async () => {
    const out = await bare.call("adjudicate", inputText)
    JSON.parse(out!.text())
    await bare.reset()
  })
  await bare.close()

  const host = Layer.mergeAll(layerPluginHost.pipe(Layer.provide(layerPluginSourceMemory([{ bytes, manifest: signed }]))), layerHostEnvMemory())
  const [stageUs, pipelineUs] = await Effect.runPromise(
    Effect.gen(function* () {
      const h = yield* PluginHost
      const env = yield* PluginHostEnv
      const loaded = yield* h.load(pin)
      const handler = grantedHostHandler(loaded.pin, { principal: "alice", now: Now }, env)
      const decode = Schema.decodeUnknownEither(AdjudicateOutput)
      // One stage: JCS + sha256 of the input, hand-off to the plugin's worker under the time
      // and memory limits, decode of the output against the stage schema.
      const stage = Effect.gen(function* () {
        const inv = yield* h.invoke(loaded, "adjudicate", stageInput, handler)
        if (inv.raw.status !== "ok" || Either.isLeft(decode(JSON.parse(inv.raw.text)))) throw new Error(`stage failed: ${inv.raw.status} ${inv.raw.text}`)
      })
      const ctx = yield* Effect.context<PluginHost | PluginHostEnv>()
      const stageUs = yield* Effect.promise(() => measure(runs, n, () => Effect.runPromise(stage)))
      const full = adjudicateWithPlugins({ proposal, policy, now: Now }).pipe(Effect.provide(ctx))
      const pipelineUs = yield* Effect.promise(() => measure(runs, n, () => Effect.runPromise(full)))
      return [stageUs, pipelineUs] as const
    }).pipe(Effect.scoped, Effect.provide(host))
  )

  return [
    row("plain JS rule adjudicator", js, js, "us/call"),
    row("bare in-process Extism call (no limits)", bareUs, js, "us/call"),
    row("plugin stage, time+memory limits (own worker)", stageUs, bareUs, "us/call", "<= 3x bare Extism"),
    row("plugin stage vs plain JS", stageUs, js, "us/call"),
    row("full plugin adjudication, 1 plugin (decisions, fold)", pipelineUs, bareUs, "us/call")
  ]
}

if (import.meta.url === `file://${process.argv[1]}`) {
  runPluginStageBench().then(
    (rows) => {
      printTable(rows)
      const get = (prefix: string) => rows.find((r) => r.figure.startsWith(prefix))!
      console.log(`\nplugin stage = ${get("plugin stage, time").ratio}x a bare Extism call, ${get("plugin stage vs").ratio}x a plain JS function (medians of ${process.env["WK_BENCH_RUNS"] ?? 7} runs)`)
      process.exit(0)
    },
    (e) => {
      console.error(e)
      process.exit(1)
    }
  )
}
