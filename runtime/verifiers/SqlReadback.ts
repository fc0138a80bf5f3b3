import pg from "pg"
import type { JsonObject, JsonValue } from "../schema/Json.js"
import { VerifierError } from "./GitAncestry.js"

/** Most rows a read-back records (the term's `expect` reads `row_count` and `rows`). */
const MaxRows = 20

const jsonOf = (v: unknown): JsonValue => (v === null || v === undefined ? null : v instanceof Date ? v.toISOString() : typeof v === "bigint" ? v.toString() : typeof v === "object" ? (JSON.parse(JSON.stringify(v)) as JsonValue) : (v as JsonValue))

/**
 * `sql-readback`: runs the term's parameterized query (`query` with `$1`... and `values`) on the
 * connection the verifier's config names `connection` (a contract never carries a connection
 * string), as one statement over the extended protocol (which refuses several), inside a READ
 * ONLY transaction with a statement timeout, as the read-only role that connection logs in with
 * (docs/verifiers.md). Reads `row_count` and the first rows.
 */
export const sqlReadback = (connections: Readonly<Record<string, string>>, timeoutMs: number) => async (params: JsonObject): Promise<JsonObject> => {
  const name = params["connection"]
  if (typeof name !== "string") throw new VerifierError("params.connection: expected the name of a connection in this verifier's config")
  const url = connections[name]
  if (url === undefined) throw new VerifierError(`params.connection: no connection '${name}' in this verifier's config`)
  const query = params["query"]
  if (typeof query !== "string" || query.trim() === "") throw new VerifierError("params.query: expected a parameterized SQL query")
  const values = params["values"] ?? []
  if (!Array.isArray(values)) throw new VerifierError("params.values: expected an array of query parameters")
  const client = new pg.Client({ connectionString: url, statement_timeout: timeoutMs, connectionTimeoutMillis: timeoutMs })
  await client.connect()
  try {
    await client.query("BEGIN READ ONLY")
    // The extended protocol carries exactly one statement: `ROLLBACK; UPDATE ...` is refused by
    // the server instead of leaving the read-only transaction.
    const statement: pg.QueryConfig & { readonly queryMode: "extended" } = { text: query, values: values as Array<unknown>, queryMode: "extended" }
    const r = await client.query(statement)
    await client.query("ROLLBACK")
    return { connection: name, row_count: r.rowCount ?? r.rows.length, rows: r.rows.slice(0, MaxRows).map((row: Record<string, unknown>) => Object.fromEntries(Object.entries(row).map(([k, v]) => [k, jsonOf(v)]))) }
  } catch (e) {
    throw new VerifierError(`sql-readback on ${name}: ${e instanceof Error ? e.message : String(e)}`)
  } finally {
    await client.end().catch(() => undefined)
  }
}
