import { execFileSync } from "node:child_process"
import { readdirSync } from "node:fs"
import { createRequire } from "node:module"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { repoRoot } from "../../runtime/cli/Paths.js"

/**
 * The house's floors (`.dependency-cruiser.cjs`) hold: every room of runtime/ stands on one floor,
 * and the folder graph that the imports draw has no cycle. The graph is built from depcruise's own
 * reading of the imports (type-only ones included), one node per room.
 */
interface Floor {
  readonly floor: string
  readonly rooms: ReadonlyArray<string>
}
interface Cruised {
  readonly modules: ReadonlyArray<{ readonly source: string; readonly dependencies: ReadonlyArray<{ readonly resolved: string }> }>
}

const floors = (createRequire(import.meta.url)(join(repoRoot, ".dependency-cruiser.cjs")) as { floors: ReadonlyArray<Floor> }).floors

/** The room a module stands in: its folder under runtime/, or its file at runtime/'s root. */
const roomOf = (path: string): string | undefined => {
  const m = /^runtime\/([^/]+)(\/)?/.exec(path)
  return m === null ? undefined : m[1]
}

const folderGraph = (): ReadonlyMap<string, ReadonlySet<string>> => {
  const out = execFileSync(process.execPath, [join(repoRoot, "node_modules/dependency-cruiser/bin/dependency-cruise.mjs"), "runtime", "--config", ".dependency-cruiser.cjs", "--output-type", "json"], {
    cwd: repoRoot,
    maxBuffer: 256 * 1024 * 1024
  })
  const cruised = JSON.parse(out.toString("utf8")) as Cruised
  const graph = new Map<string, Set<string>>()
  for (const m of cruised.modules) {
    const from = roomOf(m.source)
    if (from === undefined) continue
    const to = graph.get(from) ?? new Set<string>()
    graph.set(from, to)
    for (const d of m.dependencies) {
      const room = roomOf(d.resolved)
      if (room !== undefined && room !== from) to.add(room)
    }
  }
  return graph
}

/** The cycles of a graph: its strongly connected components of more than one node (Tarjan). */
const cyclesOf = (graph: ReadonlyMap<string, ReadonlySet<string>>): Array<Array<string>> => {
  let next = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const found: Array<Array<string>> = []
  const visit = (v: string): void => {
    index.set(v, next)
    low.set(v, next++)
    stack.push(v)
    onStack.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!))
    }
    if (low.get(v) === index.get(v)) {
      const scc: Array<string> = []
      let w: string
      do {
        w = stack.pop()!
        onStack.delete(w)
        scc.push(w)
      } while (w !== v)
      if (scc.length > 1) found.push(scc.sort())
    }
  }
  for (const v of graph.keys()) if (!index.has(v)) visit(v)
  return found
}

describe("the house's floors", () => {
  it("every room of runtime/ stands on exactly one floor", () => {
    const placed = floors.flatMap((f) => f.rooms)
    expect(new Set(placed).size).toBe(placed.length)
    const rooms = readdirSync(join(repoRoot, "runtime"), { withFileTypes: true })
      .filter((e) => e.isDirectory() || e.name.endsWith(".ts"))
      .map((e) => e.name)
      .sort()
    expect([...placed].sort()).toEqual(rooms)
  })

  it("the folders' imports form no cycle, and every import runs down the floors", () => {
    const graph = folderGraph()
    expect(cyclesOf(graph)).toEqual([])
    const floorOf = new Map(floors.flatMap((f, i) => f.rooms.map((r) => [r, i] as const)))
    const upward = [...graph].flatMap(([from, tos]) => [...tos].filter((to) => floorOf.get(to)! >= floorOf.get(from)!).map((to) => `${from} -> ${to}`))
    expect(upward).toEqual([])
    // The graph is the house's: the kernel's main rooms are in it, each reaching a floor below.
    expect(graph.get("ledger")?.has("schema")).toBe(true)
    expect(graph.get("Kernel.ts")?.has("loops")).toBe(true)
  }, 120_000)

  it("the cycle finder finds a cycle of folders", () => {
    const graph = new Map([["a", new Set(["b"])], ["b", new Set(["c"])], ["c", new Set(["a"])], ["d", new Set(["a"])]])
    expect(cyclesOf(graph)).toEqual([["a", "b", "c"]])
  })
})
