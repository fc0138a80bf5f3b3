import { spawn, spawnSync, type ChildProcess } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { freePort } from "../runtime/cli/EmbeddedNats.js"
import { repoRoot } from "../runtime/cli/Paths.js"
import { median, row, skippedRow, type Row } from "./Table.js"

/**
 * The CPU time each `wk` command costs, next to the floor of starting Node itself (`node -e 0`),
 * measured interleaved (A B A B ...) so both see the same load: the median of WK_BENCH_CLI_RUNS
 * (default 5) runs of each. CPU, not wall time: a command that asks a kernel also waits for it
 * (and `wk status` waits out its ask of every kernel), which is not the command's start. Runs the bin as a user does, `node runtime/cli/wk.mjs`, from outside
 * the repository, on the bundled CLI when it is fresh (`npm run build`); one unmeasured run of
 * each command first (the cache files of runtime/cli/wk.mjs are written by a command's first run).
 * The commands that talk to a kernel run against `wk start --dev` started here (its own NATS
 * port and data folder). Target: every command within 3x `node -e 0`.
 */
const Target = "<= 3x"

interface Timed {
  /** CPU (user + system) the process used, from its own `process.cpuUsage()` at exit, in ms. */
  readonly cpuMs: number
  readonly status: number | null
  readonly stdout: string
  readonly stderr: string
}

/**
 * Every measured process (wk and `node -e 0` alike) is started with this module preloaded: at
 * exit it writes its CPU time to file descriptor 3. A preload is not a V8 flag, so the bin's
 * code cache is still accepted.
 */
const reportCpu = `data:text/javascript,${encodeURIComponent('import { writeSync } from "node:fs"; process.on("exit", () => { const u = process.cpuUsage(); try { writeSync(3, String((u.user + u.system) / 1000)) } catch {} })')}`

const timed = (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv, cwd: string): Timed => {
  const r = spawnSync(process.execPath, ["--import", reportCpu, ...args], { cwd, env, stdio: ["ignore", "pipe", "pipe", "pipe"] })
  return { cpuMs: Number(String(r.output[3] ?? "")) || 0, status: r.status, stdout: String(r.stdout), stderr: String(r.stderr) }
}

/** A command line, and the exit it is expected to end with (docs/cli.md; 0 unless said). */
interface Case {
  readonly figure: string
  readonly args: ReadonlyArray<string>
  readonly exit?: number
}

const offline: ReadonlyArray<Case> = [
  { figure: "wk --version", args: ["--version"] },
  { figure: "wk --help", args: ["--help"] },
  { figure: "wk propose --help", args: ["propose", "--help"] },
  { figure: "wk dev-key user:carol", args: ["dev-key", "user:carol"] },
  { figure: "wk context ls", args: ["context", "ls"] },
  { figure: "wk profile explain money_transfer", args: ["profile", "explain", "money_transfer", "--principal", "agent:alice"] },
  { figure: "wk policy eval money_transfer (held)", args: ["policy", "eval", "money_transfer", '{"from":"alice","to":"bob","amount":2500}', "--principal", "agent:alice"], exit: 3 },
  { figure: "wk nats tool-user crm crm_update", args: ["nats", "tool-user", "crm", "crm_update"] }
]

const online = (heldId: string): ReadonlyArray<Case> => [
  { figure: "wk status (running kernel)", args: ["status"] },
  { figure: "wk held ls (running kernel)", args: ["held", "ls"] },
  { figure: "wk held show (running kernel)", args: ["held", "show", heldId] },
  { figure: "wk result, held (running kernel)", args: ["result", heldId], exit: 3 },
  { figure: "wk standing ls (running kernel)", args: ["standing", "ls", "--principal", "user:carol"] },
  // Last: the transfers it makes count against the example policy's limits, which decide the held call too.
  { figure: "wk propose, completed (running kernel)", args: ["propose", "money_transfer", '{"from":"alice","to":"bob","amount":25}'] }
]

const measure = (cases: ReadonlyArray<Case>, bin: string, env: NodeJS.ProcessEnv, cwd: string, runs: number): Array<Row> =>
  cases.map((c) => {
    const first = timed([bin, ...c.args], env, cwd)
    if (first.status !== (c.exit ?? 0)) return skippedRow(`${c.figure} vs node -e 0`, "CPU ms", `exited ${first.status}: ${first.stderr.trim().split("\n")[0]}`, Target)
    const node: Array<number> = []
    const wk: Array<number> = []
    for (let i = 0; i < runs; i++) {
      node.push(timed(["-e", "0"], env, cwd).cpuMs)
      wk.push(timed([bin, ...c.args], env, cwd).cpuMs)
    }
    return row(`${c.figure} vs node -e 0`, median(wk), median(node), "CPU ms", Target)
  })

/** `wk start --dev` on a port of its own; resolves once `wk status` answers. */
const startKernel = async (bin: string, env: NodeJS.ProcessEnv, cwd: string): Promise<ChildProcess> => {
  const child = spawn(process.execPath, [bin, "start", "--dev", "--metrics-port", "0"], { cwd, env, stdio: "ignore", detached: true })
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`wk start exited ${child.exitCode}`)
    if (timed([bin, "status"], env, cwd).status === 0) return child
    await new Promise((r) => setTimeout(r, 200))
  }
  throw new Error("wk start did not answer `wk status` within 2 minutes")
}

export const runCliStartBench = async (): Promise<Array<Row>> => {
  const runs = Number(process.env["WK_BENCH_CLI_RUNS"] ?? 5)
  const bin = join(repoRoot, "runtime", "cli", "wk.mjs")
  const scratch = mkdtempSync(join(tmpdir(), "wk-bench-cli-"))
  const env: NodeJS.ProcessEnv = { ...process.env, WK_CONFIG_DIR: join(scratch, "config"), WK_DATA_DIR: join(scratch, "data"), WK_NATS_PORT: String(await freePort()), NO_COLOR: "1" }
  delete env["NATS_URL"]
  delete env["WK_CONTEXT"]
  const rows = measure(offline, bin, env, scratch, runs)
  let kernel: ChildProcess | undefined
  try {
    kernel = await startKernel(bin, env, scratch)
    const held = timed([bin, "propose", "money_transfer", '{"from":"alice","to":"bob","amount":2500}'], env, scratch)
    const heldId = /\b(h_[0-9a-f]{32})\b/.exec(held.stdout)?.[1]
    if (heldId === undefined) throw new Error(`propose did not print a held id: ${held.stdout} ${held.stderr}`)
    rows.push(...measure(online(heldId), bin, env, scratch, runs))
  } catch (e) {
    for (const c of online("h_")) rows.push(skippedRow(`${c.figure} vs node -e 0`, "CPU ms", e instanceof Error ? e.message : String(e), Target))
  } finally {
    if (kernel?.pid !== undefined && kernel.exitCode === null && kernel.signalCode === null) {
      const exited = new Promise((r) => kernel!.once("exit", r))
      process.kill(-kernel.pid, "SIGTERM")
      await exited
    }
    rmSync(scratch, { recursive: true, force: true })
  }
  return rows
}
