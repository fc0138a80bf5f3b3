// The work an ALLOW call of the bench profile cannot skip, however the kernel is written, timed in
// this process on warm code: parsing the request and checking its signature, the four plugin
// stages as bare in-process Extism calls of their fuel-metered wasm on the inputs the kernel
// hands them (JCS and sha256 of each input, parsing each output), and encoding and digesting
// the call's two commits. Set against the kernel's CPU per ALLOW call (the kernel suite's notes),
// it says how much of that is overhead; set against the box's CPU, how low the kernel's CPU per
// call must go for a throughput target (docs/performance.md, "What the targets leave the kernel").
import { readFileSync } from "node:fs"
import { join } from "node:path"
import createPlugin, { type Plugin } from "@extism/extism"
import { repoRoot } from "../runtime/cli/Paths.js"
import { devKeyPair } from "../runtime/client/DevKeys.js"
import { FuelExport, meterModule } from "../runtime/plugins/internal/wasmMeter.js"
import { canonicalize, sha256Hex } from "../runtime/schema/Canonical.js"
import { chainCommit, commitDigest, encodeCommit, type Commit } from "../runtime/schema/Commit.js"
import { envelopeSignatureValid, signEnvelope } from "../runtime/schema/EnvelopeSignature.js"
import type { JsonValue } from "../runtime/schema/Json.js"
import { resolvePin } from "../runtime/schema/PluginPin.js"
import { benchProfile } from "./kernel-paths.js"
import { measureAll, note, type Row } from "./Table.js"

const Now = 1_796_521_741_617
/** The module's name in the Extism manifest: a call naming it skips listing every module's exports (as the kernel's runner does). */
const PluginModule = "plugin"
const encoder = new TextEncoder()

/** One stage of the bench profile: its plugin's metered wasm, the export it calls and the input it is handed. */
interface StageCall {
  readonly plugin: Plugin
  readonly fuel: WebAssembly.Global
  readonly stage: string
  readonly input: JsonValue
}

const proposalEnvelope = () =>
  signEnvelope(
    { op: "propose", session_id: "budget", turn_id: "t", call_id: "c1", tool: "money_transfer", args: { from: "a1", to: "b", amount: 10 }, nonce: "7db1d347b963941d0be5b834", expires_at: new Date(Now + 300_000).toISOString(), principal: "agent:alice" },
    devKeyPair("agent:alice").secretKey
  )

const stageCalls = async (): Promise<Array<StageCall>> => {
  const proposal = { principal: "agent:alice", session_id: "budget", turn_id: "t", call_id: "c1", tool: "money_transfer", args: { from: "a1", to: "b", amount: 10 } }
  const result = { transfer_id: "t1", from: "a1", to: "b", amount: 10, balance: 999_999_990 }
  const inputOf = (stage: string, config: JsonValue): JsonValue =>
    stage === "transform" ? { stage, proposal, depth: 0, config, now: Now }
    : stage === "admit" ? { stage, principal: proposal.principal, tool: proposal.tool, args: proposal.args, result, config, now: Now }
    : { stage, proposal, config, now: Now }
  const calls: Array<StageCall> = []
  for (const pin of benchProfile().plugins ?? []) {
    const bytes = new Uint8Array(readFileSync(join(repoRoot, "plugins", pin.name, "plugin.wasm")))
    const metered = meterModule(bytes)
    if (!metered.ok) throw new Error(`${pin.name}: ${metered.detail}`)
    const module = await WebAssembly.compile(new Uint8Array(metered.bytes))
    const plugin = await createPlugin({ wasm: [{ module, name: PluginModule }] }, { useWasi: false })
    const fuel = (await plugin.getInstance(PluginModule)).exports[FuelExport] as WebAssembly.Global
    for (const stage of pin.stages) calls.push({ plugin, fuel, stage, input: inputOf(stage, resolvePin(pin).config as JsonValue) })
  }
  return calls
}

/** The two commits of an ALLOW call, shaped as the kernel writes them, with the stage records in commit A. */
const commitsOf = (envelope: ReturnType<typeof proposalEnvelope>, stages: ReadonlyArray<{ readonly input: JsonValue; readonly output: JsonValue }>): [Commit, Commit] => {
  const heldId = "h_0225b74b689db1f375ee448a1c35e9e9"
  const at = new Date(Now).toISOString()
  const base = { held_id: heldId, generation: 1, at }
  const p = envelope.payload as Record<string, JsonValue>
  const decisions = stages.map((s) => ({ by: "plugin:bench@1.0.0", digest: "0".repeat(64), input_digest: sha256Hex(canonicalize(s.input)), output: { stage: (s.input as { stage: string }).stage, input: s.input, result: s.output } }))
  const a = {
    commit_id: `call.proposed:${heldId}:g1`,
    held_id: heldId,
    prev: "",
    events: [
      { ...base, type: "call.proposed", event_id: `call.proposed:${heldId}:g1`, principal: "agent:alice", session_id: p["session_id"], turn_id: p["turn_id"], call_id: p["call_id"], tool: p["tool"], args: p["args"], call_digest: "0".repeat(64), idempotency_key: `${heldId}:g1`, held_id_salt: "0".repeat(64), created_at: at, expires_at: at, envelope },
      { ...base, type: "call.adjudicated", event_id: `call.adjudicated:${heldId}:g1:e1`, verdict: "ALLOW", reasons: [], policy_epoch: 1, decisions: decisions.slice(0, 3) },
      { ...base, type: "execution.leased", event_id: `execution.leased:${heldId}:g1:a1`, owner: "kernel-budget", lease_until: at },
      { ...base, type: "effect.dispatched", event_id: `effect.dispatched:${heldId}:g1:a1`, idempotency_key: `${heldId}:g1`, attempt: 1, owner: "kernel-budget", lease_until: at, policy_epoch: 1 }
    ]
  } as unknown as Commit
  const b = {
    commit_id: `effect.recorded:${heldId}:g1:a1`,
    held_id: heldId,
    prev: "",
    events: [
      { ...base, type: "effect.recorded", event_id: `effect.recorded:${heldId}:g1:a1`, attempt: 1, ok: true, result: (stages[3]!.input as { result: JsonValue }).result },
      { ...base, type: "result.admitted", event_id: `result.admitted:${heldId}:g1:a1`, decisions: decisions.slice(3) }
    ]
  } as unknown as Commit
  return [a, b]
}

export const runCpuBudgetBench = async (runs = Number(process.env["WK_BENCH_RUNS"] ?? 5), n = Number(process.env["WK_BENCH_CALLS"] ?? 2000)): Promise<Array<Row>> => {
  const envelope = proposalEnvelope()
  const request = encoder.encode(JSON.stringify(envelope))
  const calls = await stageCalls()
  const outputs: Array<{ input: JsonValue; output: JsonValue }> = []
  const runStage = async (c: StageCall, keep = false) => {
    const text = canonicalize(c.input)
    sha256Hex(text)
    c.fuel.value = 1_000_000_000n
    const out = await c.plugin.call([PluginModule, c.stage], encoder.encode(text))
    const output = JSON.parse(out!.text()) as JsonValue
    await c.plugin.reset()
    if (keep) outputs.push({ input: c.input, output })
  }
  for (const c of calls) await runStage(c, true)
  const [commitA, commitB] = commitsOf(envelope, outputs)

  const [signature, plugins, commits] = (await measureAll(runs, n, [
    () => {
      if (!envelopeSignatureValid(JSON.parse(new TextDecoder().decode(request)))) throw new Error("the bench envelope does not verify")
    },
    async () => {
      for (const c of calls) await runStage(c)
    },
    () => {
      const a = encodeCommit(chainCommit(commitA, "", undefined))
      encodeCommit(chainCommit(commitB, commitDigest(a), undefined))
    }
  ])) as [number, number, number]
  for (const c of calls) await c.plugin.close().catch(() => undefined)

  note("budget: request parsed and its ed25519 signature checked (JCS of the payload)", signature, "us/call")
  note(`budget: the bench profile's ${calls.length} plugin stages, bare metered Extism (JCS + sha256 of each input)`, plugins, "us/call")
  note(`budget: commits A and B encoded and chained (${encodeCommit(commitA).length} + ${encodeCommit(commitB).length} bytes)`, commits, "us/call")
  note("budget: work an ALLOW call cannot skip (the three above), warm, in process", signature + plugins + commits, "us/call")
  return []
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { notes, printNotes, printTable } = await import("./Table.js")
  printTable(await runCpuBudgetBench())
  printNotes(notes)
}
