import { afterAll, beforeAll, describe, expect, it } from "vitest"
import pg from "pg"
import { sqlReadback } from "../../runtime/verifiers/SqlReadback.js"

// A term's query is one read-only statement. The attacker writes the term (one admin's change,
// held now, or a verifier config that trusts a role with write rights) and tries to leave the
// read-only transaction with a second statement.

const PgAdmin = process.env["WK_TEST_PG"] ?? "postgres://postgres@127.0.0.1:5432/postgres"
const Table = `wk_readback_statement_${process.pid}`
const read = sqlReadback({ db: PgAdmin }, 5_000)
const balance = async () => {
  const c = new pg.Client({ connectionString: PgAdmin })
  await c.connect()
  try {
    return (await c.query(`SELECT balance FROM ${Table} WHERE id = 1`)).rows[0]?.balance as number
  } finally {
    await c.end()
  }
}
const admin = async (sql: string) => {
  const c = new pg.Client({ connectionString: PgAdmin })
  await c.connect()
  try {
    await c.query(sql)
  } finally {
    await c.end()
  }
}

beforeAll(() => admin(`CREATE TABLE ${Table} (id int primary key, balance int); INSERT INTO ${Table} VALUES (1, 100)`))
afterAll(() => admin(`DROP TABLE IF EXISTS ${Table}`))

describe("sql-readback runs one read-only statement", () => {
  it("a parameterized read answers its rows", async () => {
    expect(await read({ connection: "db", query: `SELECT balance FROM ${Table} WHERE id = $1`, values: [1] })).toEqual({ connection: "db", row_count: 1, rows: [{ balance: 100 }] })
  })

  it("attack: 'ROLLBACK; UPDATE ...' (several statements) is refused by the server, and nothing is written", async () => {
    await expect(read({ connection: "db", query: `ROLLBACK; UPDATE ${Table} SET balance = 1000000 WHERE id = 1` })).rejects.toThrow(/cannot insert multiple commands into a prepared statement/)
    expect(await balance()).toBe(100)
  })

  it("attack: a single writing statement fails inside the READ ONLY transaction, and nothing is written", async () => {
    await expect(read({ connection: "db", query: `UPDATE ${Table} SET balance = 1000000 WHERE id = 1` })).rejects.toThrow(/read-only transaction/)
    expect(await balance()).toBe(100)
  })
})
