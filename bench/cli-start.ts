import { spawnSync } from "node:child_process"
import { join } from "node:path"
import { repoRoot } from "../runtime/cli/Paths.js"
import { median, row, type Row } from "./Table.js"

/**
 * How fast `wk` answers, next to the floor of starting Node itself (`node -e 0`), measured
 * interleaved so both see the same load. Runs the bin as a user does: `node runtime/cli/wk.mjs`,
 * the compiled build when it is fresh (`npm run build`), from outside the repository.
 */
const ms = (args: ReadonlyArray<string>): number => {
  const t0 = process.hrtime.bigint()
  const r = spawnSync(process.execPath, args, { cwd: "/", stdio: ["ignore", "ignore", "pipe"] })
  if (r.status !== 0) throw new Error(`node ${args.join(" ")} exited ${r.status}: ${String(r.stderr)}`)
  return Number(process.hrtime.bigint() - t0) / 1e6
}

export const runCliStartBench = async (): Promise<Array<Row>> => {
  const runs = Number(process.env["WK_BENCH_CLI_RUNS"] ?? 15)
  const bin = join(repoRoot, "runtime", "cli", "wk.mjs")
  const cases: ReadonlyArray<readonly [string, ReadonlyArray<string>, string | undefined]> = [
    ["wk --version vs node -e 0", ["--version"], "<= 5x"],
    ["wk --help vs node -e 0", ["--help"], undefined],
    ["wk propose --help (loads the command) vs node -e 0", ["propose", "--help"], undefined]
  ]
  const rows: Array<Row> = []
  for (const [figure, args, target] of cases) {
    const node: Array<number> = []
    const wk: Array<number> = []
    ms([bin, ...args]) // warm the file cache
    for (let i = 0; i < runs; i++) {
      node.push(ms(["-e", "0"]))
      wk.push(ms([bin, ...args]))
    }
    rows.push(row(figure, median(wk), median(node), "ms", target))
  }
  return rows
}
