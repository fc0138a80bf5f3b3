import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { runSoak, type SoakReport } from "./Soak.js"
import { clusterTopology, singleServer, type Topology } from "./Topology.js"

const usage = `npm run chaos -- [options]

The soak with faults (loopback only, bounded in time and count). Options:
  --agents N             concurrent agents (default 8)
  --calls N              calls per agent (default 40)
  --kernels N            kernel processes (default 2)
  --witnesses N          concurrent witnesses (default 3)
  --kill-every MS        mean time between random kernel SIGKILLs (default 4000; 0: none)
  --kill-after-effect N  SIGKILL every kernel right after every Nth effect, before it is recorded (default 7; 0: never)
  --nats-every MS        mean time between NATS faults (default 15000; 0: none)
  --hostile-every MS     mean time between hostile-plugin windows (default 30000; 0: none)
  --hostile-for MS       how long each hostile plugin stays pinned (default 1000)
  --tool-outage-every MS mean time between tool outages, the bank unsubscribed (default 8000; 0: none)
  --tool-outage-for MS   how long each tool outage lasts (default 1500)
  --witness-retry P      percent of approvals a witness sends again, same bytes, a little later (default 30)
  --held-ttl MS          how long a held call waits before it expires (default 120000)
  --end-grace MS         how late after its expiry a call may still end (default 30000)
  --cluster              a 3-node NATS JetStream cluster instead of one server
  --deadline S           hard bound on the run in seconds (default 900)
  --seed N               the mix of calls and faults (default: from the clock)
  --out FILE             the JSON report (default .wk/chaos/soak-<time>.json)
Exit status 0 only when every check passed.`

const int = (name: string, v: string | undefined, dflt: number): number => {
  if (v === undefined) return dflt
  const n = Number(v)
  if (!Number.isInteger(n) || n < 0) {
    console.error(`--${name}: expected a whole number >= 0, got '${v}'\n\n${usage}`)
    process.exit(2)
  }
  return n
}

const parsed = (() => {
  try {
    return parseArgs({
      options: {
        agents: { type: "string" }, calls: { type: "string" }, kernels: { type: "string" }, witnesses: { type: "string" },
        "kill-every": { type: "string" }, "kill-after-effect": { type: "string" }, "nats-every": { type: "string" },
        "hostile-every": { type: "string" }, "hostile-for": { type: "string" }, cluster: { type: "boolean" },
        "tool-outage-every": { type: "string" }, "tool-outage-for": { type: "string" }, "witness-retry": { type: "string" },
        "held-ttl": { type: "string" }, "end-grace": { type: "string" },
        deadline: { type: "string" }, seed: { type: "string" }, out: { type: "string" }, help: { type: "boolean", short: "h" }
      }
    }).values
  } catch (e) {
    console.error(`${(e as Error).message}\n\n${usage}`)
    process.exit(2)
  }
})()
if (parsed.help) {
  console.log(usage)
  process.exit(0)
}

// Ctrl-C exits through process.exit, so the kernels and nats-servers started here are killed too.
process.once("SIGINT", () => {
  console.error("\ninterrupted: stopping the kernels and NATS started by the soak")
  process.exit(130)
})

const started = Date.now()
const log = (line: string) => process.stderr.write(`[chaos +${((Date.now() - started) / 1000).toFixed(1)}s] ${line}\n`)

const topology: Topology = parsed.cluster
  ? await clusterTopology()
  : await singleServer()
let report: SoakReport
try {
  report = await runSoak({
    topology,
    agents: Math.max(1, int("agents", parsed.agents, 8)),
    callsPerAgent: int("calls", parsed.calls, 40),
    kernels: Math.max(1, int("kernels", parsed.kernels, 2)),
    witnesses: Math.max(1, int("witnesses", parsed.witnesses, 3)),
    kernelKillEveryMs: int("kill-every", parsed["kill-every"], 4000),
    killAfterEffectEvery: int("kill-after-effect", parsed["kill-after-effect"], 7),
    natsFaultEveryMs: int("nats-every", parsed["nats-every"], 15_000),
    hostileEveryMs: int("hostile-every", parsed["hostile-every"], 30_000),
    hostileWindowMs: int("hostile-for", parsed["hostile-for"], 1000),
    toolOutageEveryMs: int("tool-outage-every", parsed["tool-outage-every"], 8000),
    toolOutageForMs: int("tool-outage-for", parsed["tool-outage-for"], 1500),
    witnessRetryChance: Math.min(100, int("witness-retry", parsed["witness-retry"], 30)) / 100,
    heldTtlMs: Math.max(1000, int("held-ttl", parsed["held-ttl"], 120_000)),
    endGraceMs: int("end-grace", parsed["end-grace"], 30_000),
    deadlineMs: int("deadline", parsed.deadline, 900) * 1000,
    seed: int("seed", parsed.seed, Date.now() % 2 ** 31),
    log
  })
} finally {
  await topology.dispose()
}

const rows: Array<[string, string]> = [
  ["topology", report.topology],
  ["seed", String(report.seed)],
  ["duration", `${(report.duration_ms / 1000).toFixed(1)} s`],
  ["calls (allow / deny / held)", `${report.calls.total} (${report.calls.allow} / ${report.calls.deny} / ${report.calls.held})`],
  ["policy changes (held calls)", String(report.calls.policy_changes)],
  ["outcomes", Object.entries(report.outcomes).map(([k, v]) => `${k} ${v}`).join(", ")],
  ["kernel SIGKILLs (after effect)", `${report.faults.kernel_kills} (${report.faults.kills_after_effect} rounds)`],
  ["NATS faults", String(report.faults.nats_faults)],
  ["tool outages", String(report.faults.tool_outages)],
  ["witness re-sends (same bytes)", String(report.faults.witness_resends)],
  ["hostile plugin windows", `${report.faults.hostile_windows} (${report.faults.fail_closed_decisions} calls failed closed)`],
  ["kernel recoveries", String(report.recoveries)],
  ["client retries", String(report.client_retries)],
  ["effects / completed transfers", `${report.effects} / ${report.completed_transfers}`],
  ["duplicates", String(report.duplicates)],
  ["lost", String(report.lost)],
  ["ALLOW latency p50 / p99", `${report.latency_ms.allow_p50} / ${report.latency_ms.allow_p99} ms`],
  ["held release p50 / p99 (approval -> delivered)", `${report.latency_ms.release_p50} / ${report.latency_ms.release_p99} ms`],
  ["audit replay", report.audit.ok ? `passed (${report.audit.held_calls} calls, ${report.audit.events} events)` : `FAILED: ${report.audit.failed_checks.join(", ")}`]
]
const width = Math.max(...rows.map(([k]) => k.length))
console.log(`\n${"figure".padEnd(width)}  value\n${"-".repeat(width)}  -----`)
for (const [k, v] of rows) console.log(`${k.padEnd(width)}  ${v}`)
for (const p of report.problems) console.log(`PROBLEM: ${p}`)
const out = parsed.out ?? join(repoRoot, ".wk", "chaos", `soak-${new Date().toISOString().replace(/[:.]/g, "-")}.json`)
mkdirSync(join(out, ".."), { recursive: true })
writeFileSync(out, JSON.stringify(report, null, 2))
console.log(`\n${report.ok ? "PASSED" : "FAILED"}; wrote ${out}`)
process.exit(report.ok ? 0 : 1)
