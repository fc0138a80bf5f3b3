// LangGraph with a PostgreSQL checkpointer doing the same call as the kernel's ALLOW path: a graph
// with one node, the same trivial tool round trip over NATS, each call its own thread, every
// checkpoint written before the graph goes on (`durability: "sync"`). It runs in the bench
// process, against the PostgreSQL server of the DBOS row (WK_BENCH_PG) in a scratch database.
// The packages are not dependencies of the kernel: they are imported from the repo when present,
// else from WK_BENCH_LANGGRAPH_DIR (a scratch directory where they were installed), else the
// row is skipped.
import { createRequire } from "node:module"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import type { NatsConnection } from "@nats-io/transport-node"
import { defaultPgServer } from "./dbos-workflow.js"

export const LangGraphDatabase = "wk_bench_langgraph"
const urlOf = (server: string, database: string) => `postgresql://postgres@${server}/${database}`
/** The checkpointer's pool: 64 agents get 32 connections, as DBOS does. */
const PoolSize = 32

export interface LangGraphFigures {
  readonly latencies: ReadonlyArray<ReadonlyArray<number>>
  readonly rates: ReadonlyArray<number>
  /** Threads with a stored checkpoint, and how many calls the bench made. */
  readonly checkpointed: number
  readonly ran: number
}

export type LangGraphOutcome = { readonly skipped: string } | { readonly figures: LangGraphFigures }

interface PgClient {
  connect(): Promise<void>
  query(q: string): Promise<{ rows: Array<Record<string, unknown>> }>
  end(): Promise<void>
}
interface PgModule {
  Client: new (o: { connectionString: string; connectionTimeoutMillis?: number }) => PgClient
  Pool: new (o: { connectionString: string; max: number }) => { end(): Promise<void> }
}

/** The few pieces of LangGraph the bench uses, typed here (the package may be absent at compile time). */
interface Compiled {
  invoke(input: { input: string }, config: { configurable: { thread_id: string }; durability: "sync" }): Promise<{ output: string }>
}
interface LangGraphModule {
  StateGraph: new (state: unknown) => { addNode(name: string, f: (s: { input: string }) => Promise<{ output: string }>): { addEdge(a: string, b: string): { addEdge(a: string, b: string): { compile(o: { checkpointer: unknown }): Compiled } } } }
  Annotation: { Root(fields: Record<string, unknown>): unknown } & (<T>() => T)
  START: string
  END: string
}
interface PostgresModule {
  PostgresSaver: new (pool: unknown) => { setup(): Promise<void> }
}

/** Imports a package from the repo, else from WK_BENCH_LANGGRAPH_DIR; null when neither has it. */
const importPackage = async <T>(name: string): Promise<T | null> => {
  try {
    return (await import(name)) as T
  } catch {
    const dir = process.env["WK_BENCH_LANGGRAPH_DIR"]
    if (dir === undefined) return null
    try {
      return (await import(pathToFileURL(createRequire(join(dir, "package.json")).resolve(name)).href)) as T
    } catch {
      return null
    }
  }
}

const scratchDatabase = async (pg: PgModule, server: string): Promise<string | null> => {
  const c = new pg.Client({ connectionString: urlOf(server, "postgres"), connectionTimeoutMillis: 3000 })
  try {
    await c.connect()
  } catch (e) {
    return `no PostgreSQL server at ${server} (${String(e instanceof Error ? e.message : e)})`
  }
  try {
    await c.query(`DROP DATABASE IF EXISTS ${LangGraphDatabase} WITH (FORCE)`)
    await c.query(`CREATE DATABASE ${LangGraphDatabase}`)
    return null
  } catch (e) {
    return `cannot create the scratch database ${LangGraphDatabase}: ${String(e instanceof Error ? e.message : e)}`
  } finally {
    await c.end()
  }
}

/**
 * Measures LangGraph as `measureDbos` measures DBOS: `runs` sequential runs of `perRun` calls,
 * then `runs` runs of `total` calls from `agents` concurrent callers.
 */
export const measureLangGraph = async (opts: {
  readonly nc: NatsConnection
  readonly toolSubject: string
  readonly payload: string
  readonly runs: number
  readonly perRun: number
  readonly total: number
  readonly agents?: number
  readonly pgServer?: string
}): Promise<LangGraphOutcome> => {
  const server = opts.pgServer ?? defaultPgServer
  const lg = await importPackage<LangGraphModule>("@langchain/langgraph")
  if (lg === null) return { skipped: "@langchain/langgraph is not installed (or set WK_BENCH_LANGGRAPH_DIR)" }
  const saverModule = await importPackage<PostgresModule>("@langchain/langgraph-checkpoint-postgres")
  if (saverModule === null) return { skipped: "@langchain/langgraph-checkpoint-postgres is not installed" }
  const pg = (await importPackage<{ default: PgModule }>("pg"))?.default
  if (pg === undefined) return { skipped: "pg is not installed" }
  const why = await scratchDatabase(pg, server)
  if (why !== null) return { skipped: why }
  const pool = new pg.Pool({ connectionString: urlOf(server, LangGraphDatabase), max: PoolSize })
  try {
    const saver = new saverModule.PostgresSaver(pool)
    await saver.setup()
    const State = lg.Annotation.Root({ input: lg.Annotation<string>(), output: lg.Annotation<string>() })
    const app = new lg.StateGraph(State)
      .addNode("tool", async (s) => ({ output: new TextDecoder().decode((await opts.nc.request(opts.toolSubject, s.input, { timeout: 5000 })).data) }))
      .addEdge(lg.START, "tool")
      .addEdge("tool", lg.END)
      .compile({ checkpointer: saver })
    let ran = 0
    const one = async () => {
      const r = await app.invoke({ input: opts.payload }, { configurable: { thread_id: `t${++ran}` }, durability: "sync" })
      if (r.output !== opts.payload) throw new Error(`LangGraph bench: the node returned ${String(r.output).slice(0, 40)}`)
    }
    const sequential = async () => {
      const out: Array<number> = []
      for (let i = 0; i < opts.perRun; i++) {
        const t0 = performance.now()
        await one()
        out.push(performance.now() - t0)
      }
      return out
    }
    const concurrent = async (total: number) => {
      let left = total
      const t0 = performance.now()
      await Promise.all(Array.from({ length: opts.agents ?? 64 }, async () => { while (left-- > 0) await one() }))
      return total / ((performance.now() - t0) / 1000)
    }
    await sequential() // warm-up, excluded
    const latencies: Array<Array<number>> = []
    for (let r = 0; r < opts.runs; r++) latencies.push(await sequential())
    await concurrent(Math.max(50, Math.floor(opts.total / 4))) // warm-up, excluded
    const rates: Array<number> = []
    for (let r = 0; r < opts.runs; r++) rates.push(await concurrent(opts.total))
    const c = new pg.Client({ connectionString: urlOf(server, LangGraphDatabase) })
    await c.connect()
    const checkpointed = Number((await c.query("SELECT count(DISTINCT thread_id)::int AS n FROM checkpoints")).rows[0]?.["n"] ?? 0)
    await c.end()
    return { figures: { latencies, rates, checkpointed, ran } }
  } finally {
    await pool.end()
  }
}
