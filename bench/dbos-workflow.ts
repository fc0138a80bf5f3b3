// DBOS (durable workflows on PostgreSQL) doing the same call as the kernel's ALLOW path: a durable
// workflow with one step, the same trivial tool round trip over NATS. DBOS runs in the bench
// process (it has no process of its own between the caller and the workflow), against the
// PostgreSQL server on 127.0.0.1:5432 (trust auth, user postgres) in a scratch database.
import type { NatsConnection } from "@nats-io/transport-node"

export const DbosDatabase = "wk_bench_dbos"
const PgHost = process.env["WK_BENCH_PG_HOST"] ?? "127.0.0.1"
const PgPort = Number(process.env["WK_BENCH_PG_PORT"] ?? 5432)
const adminUrl = `postgresql://postgres@${PgHost}:${PgPort}/postgres`
export const dbosUrl = `postgresql://postgres@${PgHost}:${PgPort}/${DbosDatabase}`
/** The system database pool: DBOS's default is 10; 64 agents get 32 so the pool is not what limits them. */
const PoolSize = 32

export interface DbosFigures {
  readonly latencies: ReadonlyArray<ReadonlyArray<number>>
  readonly rates: ReadonlyArray<number>
  /** Workflows DBOS recorded as SUCCESS in the scratch database, and how many the bench ran. */
  readonly succeeded: number
  readonly ran: number
}

/** Why DBOS cannot be measured here (package or server missing), or null when it can. */
export type DbosOutcome = { readonly skipped: string } | { readonly figures: DbosFigures }

interface PgClient {
  connect(): Promise<void>
  query(q: string): Promise<{ rows: Array<Record<string, unknown>> }>
  end(): Promise<void>
}
type PgModule = { Client: new (o: { connectionString: string; connectionTimeoutMillis?: number }) => PgClient }

const importOrNull = async <T>(name: string): Promise<T | null> => {
  try {
    return (await import(name)) as T
  } catch {
    return null
  }
}

/** Creates the scratch database afresh (a previous run's workflows would only slow DBOS's start). */
const scratchDatabase = async (pg: PgModule): Promise<string | null> => {
  const c = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 3000 })
  try {
    await c.connect()
  } catch (e) {
    return `no PostgreSQL server at ${PgHost}:${PgPort} (${String(e instanceof Error ? e.message : e)})`
  }
  try {
    await c.query(`DROP DATABASE IF EXISTS ${DbosDatabase} WITH (FORCE)`)
    await c.query(`CREATE DATABASE ${DbosDatabase}`)
    return null
  } catch (e) {
    return `cannot create the scratch database ${DbosDatabase}: ${String(e instanceof Error ? e.message : e)}`
  } finally {
    await c.end()
  }
}

/**
 * Measures DBOS: `runs` sequential runs of `perRun` workflows (each run's latencies), then `runs`
 * runs of `total` workflows from `agents` concurrent callers (calls per second). `tool` answers the
 * step's request on `toolSubject` (the same echo the kernel and its floor call).
 */
export const measureDbos = async (opts: {
  readonly nc: NatsConnection
  readonly toolSubject: string
  readonly payload: string
  readonly runs: number
  readonly perRun: number
  readonly total: number
  readonly agents?: number
}): Promise<DbosOutcome> => {
  const sdk = await importOrNull<typeof import("@dbos-inc/dbos-sdk")>("@dbos-inc/dbos-sdk")
  if (sdk === null) return { skipped: "@dbos-inc/dbos-sdk is not installed" }
  const pg = await importOrNull<{ default: PgModule }>("pg")
  if (pg === null) return { skipped: "pg (a dependency of @dbos-inc/dbos-sdk) is not installed" }
  const why = await scratchDatabase(pg.default)
  if (why !== null) return { skipped: why }
  const { DBOS } = sdk
  DBOS.setConfig({ name: "wk-bench", systemDatabaseUrl: dbosUrl, systemDatabasePoolSize: PoolSize, logLevel: "error" })
  const call = DBOS.registerWorkflow(
    async (body: string) => DBOS.runStep(async () => new TextDecoder().decode((await opts.nc.request(opts.toolSubject, body, { timeout: 5000 })).data), { name: "tool" }),
    { name: "benchCall" }
  )
  await DBOS.launch()
  let ran = 0
  try {
    const sequential = async () => {
      const out: Array<number> = []
      for (let i = 0; i < opts.perRun; i++) {
        const t0 = performance.now()
        const r = await call(opts.payload)
        out.push(performance.now() - t0)
        ran++
        if (r !== opts.payload) throw new Error(`DBOS bench: the step returned ${r.slice(0, 40)}`)
      }
      return out
    }
    const concurrent = async (total: number) => {
      let left = total
      const t0 = performance.now()
      await Promise.all(
        Array.from({ length: opts.agents ?? 64 }, async () => {
          while (left-- > 0) {
            await call(opts.payload)
            ran++
          }
        })
      )
      return total / ((performance.now() - t0) / 1000)
    }
    await sequential() // warm-up, excluded
    const latencies: Array<Array<number>> = []
    for (let r = 0; r < opts.runs; r++) latencies.push(await sequential())
    await concurrent(Math.max(50, Math.floor(opts.total / 4))) // warm-up, excluded
    const rates: Array<number> = []
    for (let r = 0; r < opts.runs; r++) rates.push(await concurrent(opts.total))
    const succeeded = await countSucceeded(pg.default)
    return { figures: { latencies, rates, succeeded, ran } }
  } finally {
    await DBOS.shutdown()
  }
}

const countSucceeded = async (pg: PgModule): Promise<number> => {
  const c = new pg.Client({ connectionString: dbosUrl })
  await c.connect()
  try {
    const r = await c.query("SELECT count(*)::int AS n FROM dbos.workflow_status WHERE status = 'SUCCESS' AND name = 'benchCall'")
    return Number(r.rows[0]?.["n"] ?? 0)
  } finally {
    await c.end()
  }
}
