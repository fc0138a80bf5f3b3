import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { repoRoot } from "../runtime/cli/Paths.js"
import { runAuditReplayBench } from "./audit-replay.js"
import { runAuditRerunBench } from "./audit-rerun.js"
import { runCliStartBench } from "./cli-start.js"
import { runCpuBudgetBench } from "./cpu-budget.js"
import { runCriticalPathBench } from "./critical-path.js"
import { runEffectOpsBench } from "./effect-ops.js"
import { runHostileLoadBench } from "./hostile-load.js"
import { runKernelPathBench } from "./kernel-paths.js"
import { runParkedMemoryBench } from "./parked-memory.js"
import { runPluginStageBench } from "./plugin-stage.js"
import { runPolicyReevalBench } from "./policy-reeval.js"
import { notes, printNotes, printTable, type Row } from "./Table.js"

/**
 * `npm run bench`: every figure next to its floor, measured in the same run. Select with
 * WK_BENCH_ONLY=cli,kernel,path,budget,effect,hostile,plugin,audit,rerun,memory,reeval; sizes with WK_BENCH_RUNS, WK_BENCH_PER_RUN,
 * WK_BENCH_RERUN_CALLS (history sizes of the replay with plugin re-runs; default 1000,10000),
 * WK_BENCH_PARKED (default 100,000 parked calls: that part takes minutes), WK_BENCH_REEVAL_N (open
 * held calls a policy change re-evaluates; default 10,000, 100,000 for the full figure). WK_BENCH_QUICK=1 runs the
 * kernel suite once with few calls, to see its rows produced (figures are noise); WK_BENCH_DBOS=0
 * skips the DBOS rows (they need `@dbos-inc/dbos-sdk` and PostgreSQL on 127.0.0.1:5432), WK_BENCH_LANGGRAPH=0 the
 * LangGraph rows (`@langchain/langgraph` and `@langchain/langgraph-checkpoint-postgres`, from the repo or
 * WK_BENCH_LANGGRAPH_DIR).
 */
const suites: ReadonlyArray<readonly [string, () => Promise<Array<Row>>]> = [
  ["cli", runCliStartBench],
  ["kernel", runKernelPathBench],
  ["path", runCriticalPathBench],
  ["budget", () => runCpuBudgetBench()],
  ["effect", runEffectOpsBench],
  ["hostile", runHostileLoadBench],
  ["plugin", () => runPluginStageBench()],
  ["audit", runAuditReplayBench],
  ["rerun", runAuditRerunBench],
  ["memory", () => runParkedMemoryBench()],
  ["reeval", () => runPolicyReevalBench()]
]
const only = (process.env["WK_BENCH_ONLY"] ?? "").split(",").filter((s) => s !== "")
const rows: Array<Row> = []
for (const [name, run] of suites) {
  if (only.length > 0 && !only.includes(name)) continue
  process.stderr.write(`bench: ${name}...\n`)
  rows.push(...(await run()))
}
printTable(rows)
printNotes(notes)
const dir = join(repoRoot, "bench", "results")
mkdirSync(dir, { recursive: true })
const file = join(dir, `bench-${new Date().toISOString().replace(/[:.]/g, "-")}.json`)
writeFileSync(file, JSON.stringify({ at: new Date().toISOString(), rows, notes }, null, 2))
console.log(`\nwrote ${file}`)
