// The work an ALLOW call of the bench profile cannot skip, however the kernel is written
// (bench/internal/callWork.ts), timed in this process on warm code: the request parsed, its
// signature checked and its payload decoded; the four plugin stages as bare in-process Extism
// calls; the two commits encoded and chained. Set against the kernel's CPU per ALLOW call (the
// kernel suite's notes), it says how much of that is overhead; set against the box's CPU, how low
// the kernel's CPU per call must go for a throughput target (docs/performance.md, "What the
// targets leave the kernel"). The kernel suite's work floor does the same work in a process of
// its own around the durable floor's exchanges.
import { devKeyPair } from "../runtime/client/DevKeys.js"
import { signEnvelope } from "../runtime/schema/EnvelopeSignature.js"
import type { JsonValue } from "../runtime/schema/Json.js"
import { loadCallWork } from "./internal/callWork.js"
import { measureAll, note, type Row } from "./Table.js"

const Now = 1_796_521_741_617
const HeldId = "h_0225b74b689db1f375ee448a1c35e9e9"
const encoder = new TextEncoder()

const proposalRequest = () =>
  encoder.encode(
    JSON.stringify(
      signEnvelope(
        { op: "propose", session_id: "budget", turn_id: "t", call_id: "c1", tool: "money_transfer", args: { from: "a1", to: "b", amount: 10 }, nonce: "7db1d347b963941d0be5b834", expires_at: new Date(Now + 300_000).toISOString(), principal: "agent:alice" },
        devKeyPair("agent:alice").secretKey
      )
    )
  )

export const runCpuBudgetBench = async (runs = Number(process.env["WK_BENCH_RUNS"] ?? 5), n = Number(process.env["WK_BENCH_CALLS"] ?? 2000)): Promise<Array<Row>> => {
  const work = await loadCallWork()
  try {
    const request = proposalRequest()
    const call = work.accept(request)
    const result: JsonValue = { transfer_id: "t1", from: "a1", to: "b", amount: 10, balance: 999_999_990 }
    const stages = await work.adjudicate(call, Now)
    const admitted = await work.admit(call.payload, result, Now)
    const [signature, plugins, commits] = (await measureAll(runs, n, [
      () => void work.accept(request),
      async () => {
        await work.adjudicate(call, Now)
        await work.admit(call.payload, result, Now)
      },
      () => void work.commitB(HeldId, result, admitted, work.commitA(HeldId, call, stages, "", Now), Now)
    ])) as [number, number, number]
    const a = work.commitA(HeldId, call, stages, "", Now)
    note("budget: request parsed, its ed25519 signature checked (JCS of the payload), its payload decoded", signature, "us/call")
    note(`budget: the bench profile's ${stages.length + 1} plugin stages, bare metered Extism (JCS + sha256 of each input, output decoded)`, plugins, "us/call")
    note(`budget: commits A and B encoded and chained (${a.length} + ${work.commitB(HeldId, result, admitted, a, Now).length} bytes)`, commits, "us/call")
    note("budget: work an ALLOW call cannot skip (the three above), warm, in process", signature + plugins + commits, "us/call")
    return []
  } finally {
    await work.close()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { notes, printNotes, printTable } = await import("./Table.js")
  printTable(await runCpuBudgetBench())
  printNotes(notes)
}
