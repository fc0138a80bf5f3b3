import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { execFileSync, spawn } from "node:child_process"
import { repoRoot } from "../../runtime/cli/Paths.js"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { inboxOptionOf } from "../../runtime/schema/Subjects.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { gitAncestry } from "../../runtime/verifiers/GitAncestry.js"
import { sqlReadback } from "../../runtime/verifiers/SqlReadback.js"
import { VerifierRunner } from "../../runtime/verifiers/VerifierRunner.js"
import type { WitnessContract } from "../../runtime/schema/WitnessContract.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, principal, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { EchoTool } from "../support/EchoTool.js"
import { eventually } from "../support/Stream.js"

// Evidence the kernel verifies: a deploy needs a human's approval, a git-ancestry verifier's
// evidence that the commit is on main (a real repository the test creates) and a CI principal's
// signed status for that commit; a refund needs a SQL read-back (real PostgreSQL, a read-only
// role) that the order is paid. Verifiers attest under their own principals and never release a
// call alone.
const PgAdmin = process.env["WK_TEST_PG"] ?? "postgres://postgres@127.0.0.1:5432/postgres"
const Db = "wk_verifier_test"
const ReadOnly = `postgres://wk_verifier_ro:ro-pass@127.0.0.1:5432/${Db}`

const deployContract: WitnessContract = {
  rule: { class: "human" },
  evidence: [
    { name: "merged", kind: "git-ancestry", by: { class: "verifier" }, params: { repo: "app", commit: "{args.commit}", ref: "main" }, expect: { commit: "{args.commit}", is_ancestor: true } },
    { name: "ci", kind: "ci-status", by: { class: "ci" }, expect: { commit: "{args.commit}", check: "build", conclusion: "success" } }
  ]
}
const refundContract: WitnessContract = {
  rule: { class: "human" },
  evidence: [{ name: "paid", kind: "sql-readback", by: { class: "verifier" }, params: { connection: "orders", query: "select status from orders where id = $1", values: ["{args.order_id}"] }, expect: { row_count: 1, rows: [{ status: "paid" }] } }]
}
const base = testProfile()
const profile = testProfile({
  principals: { ...base.principals, ...Object.fromEntries([principal("svc:verifier", "verifier"), principal("svc:ci", "ci")]) },
  grants: { "agent:alice": ["deploy", "http_post"] },
  rules: { deploy: { always_witness: true, contract: deployContract }, http_post: { always_witness: true, contract: refundContract } }
})

let nats: TestNats
let kernel: InProcessKernel
let echo: EchoTool
let echoConn: NatsConnection
let agentConn: NatsConnection
let witnessConn: NatsConnection
let alice: WitnessClient
let carol: WitnessClient
let ci: WitnessClient
let runner: VerifierRunner
let repo: string
let onMain: string
let offMain: string

const git = (...args: Array<string>) => execFileSync("git", ["-C", repo, ...args], { encoding: "utf8", env: { ...process.env, GIT_AUTHOR_NAME: "t", GIT_AUTHOR_EMAIL: "t@t", GIT_COMMITTER_NAME: "t", GIT_COMMITTER_EMAIL: "t@t" } }).trim()
const admin = async <A>(db: string, f: (c: pg.Client) => Promise<A>): Promise<A> => {
  const c = new pg.Client({ connectionString: PgAdmin.replace(/\/[^/]*$/, `/${db}`) })
  await c.connect()
  try {
    return await f(c)
  } finally {
    await c.end()
  }
}

let n = 0
const propose = async (tool: string, args: Record<string, string>) => {
  const r = (await alice.propose({ session_id: "s-verify", turn_id: "t1", call_id: `v${++n}`, tool, args })) as { status: number; held_id: string }
  expect(r.status).toBe(202)
  return r.held_id
}
const factsOf = async (heldId: string) => (await carol.get(heldId)).held as unknown as Record<string, unknown> & { lifecycle: string; generation: number; call_digest: string; contract_digest: string }
const ciStatus = async (heldId: string, commit: string, conclusion: string) => {
  const h = await factsOf(heldId)
  return ci.attest({ held_id: heldId, class: "ci", decision: "evidence", generation: h.generation, call_digest: h.call_digest, contract_digest: h.contract_digest, evidence: { term: "ci", kind: "ci-status", read: { commit, check: "build", conclusion } } })
}
const effectsOf = (tool: string) => [...echo.applied.values()].filter((v) => (v as { tool: string }).tool === tool).length

beforeAll(async () => {
  repo = mkdtempSync(join(tmpdir(), "wk-verify-repo-"))
  execFileSync("git", ["init", "-q", "-b", "main", repo])
  writeFileSync(join(repo, "a.txt"), "1")
  git("add", ".")
  git("commit", "-q", "-m", "on main")
  onMain = git("rev-parse", "HEAD")
  git("checkout", "-q", "-b", "feature")
  writeFileSync(join(repo, "a.txt"), "2")
  git("commit", "-q", "-am", "not merged")
  offMain = git("rev-parse", "HEAD")
  git("checkout", "-q", "main")

  await admin("postgres", async (c) => {
    await c.query(`DROP DATABASE IF EXISTS ${Db}`)
    await c.query(`CREATE DATABASE ${Db}`)
    await c.query("DROP ROLE IF EXISTS wk_verifier_ro")
    await c.query("CREATE ROLE wk_verifier_ro LOGIN PASSWORD 'ro-pass'")
  })
  await admin(Db, async (c) => {
    await c.query("CREATE TABLE orders (id text primary key, status text not null)")
    await c.query("INSERT INTO orders VALUES ('o1', 'paid'), ('o2', 'pending')")
    await c.query("GRANT SELECT ON orders TO wk_verifier_ro")
  })

  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [profile])
  echoConn = await connectAs(nats.servers, "echo")
  echo = new EchoTool(["deploy", "http_post"]).serve(echoConn)
  agentConn = await connectAs(nats.servers, "agent")
  witnessConn = await connectAs(nats.servers, "witness")
  alice = clientFor(agentConn, "agent:alice")
  carol = clientFor(witnessConn, "user:carol")
  ci = clientFor(witnessConn, "svc:ci")
  runner = new VerifierRunner({
    client: clientFor(witnessConn, "svc:verifier"),
    class: "verifier",
    checks: { "git-ancestry": gitAncestry({ app: repo }, 5_000), "sql-readback": sqlReadback({ orders: ReadOnly }, 5_000) },
    timeoutMs: 10_000
  })
}, 60_000)

afterAll(async () => {
  runner?.stop()
  echo?.stop()
  await kernel?.stop()
  await Promise.all([echoConn, agentConn, witnessConn].map((c) => c?.close()))
  await nats?.dispose()
})

describe("evidence the kernel verifies", () => {
  it("a deploy runs once: after the human, the git-ancestry verifier (commit on main) and CI's signed status for that commit", async () => {
    const heldId = await propose("deploy", { commit: onMain })
    expect((await carol.decide(heldId, "human")).disposition).toBe("accepted")
    // The verifier reads the repository (run here by the test; the last test runs `wk verifier`, which hears the witness request itself).
    const verified = await runner.verify(heldId)
    expect(verified).toEqual([{ term: "merged", status: "attested", disposition: "accepted", read: { repo: "app", commit: onMain, ref: "main", commit_sha: onMain, ref_sha: onMain, is_ancestor: true } }])
    expect((await factsOf(heldId)).lifecycle).toBe("open")
    expect(effectsOf("deploy")).toBe(0)
    // CI's status for another commit does not meet the term; for this one it does.
    expect((await ciStatus(heldId, offMain, "success")).disposition).toBe("accepted")
    expect((await factsOf(heldId)).lifecycle).toBe("open")
    expect((await ciStatus(heldId, onMain, "success")).disposition).toBe("accepted")
    await eventually(async () => effectsOf("deploy") === 1)
    await eventually(async () => (await factsOf(heldId))["outcome"] === "completed")
  })

  it("a commit that is not on main stays held whatever CI says and whoever approves", async () => {
    const heldId = await propose("deploy", { commit: offMain })
    expect((await carol.decide(heldId, "human")).disposition).toBe("accepted")
    const [v] = await runner.verify(heldId)
    expect(v).toMatchObject({ status: "attested", read: { is_ancestor: false } })
    expect((await ciStatus(heldId, offMain, "success")).disposition).toBe("accepted")
    // Give the kernel its chance: a fresh drive after the last attestation finds the term unmet.
    expect((await carol.decide(heldId, "human")).disposition).toMatch(/accepted|duplicate/)
    expect((await factsOf(heldId)).lifecycle).toBe("open")
    expect(effectsOf("deploy")).toBe(1)
  })

  it("evidence binds content: a branch the agent names is refused, so moving it after the check runs nothing; the full commit id is what is checked and run", async () => {
    git("branch", "-f", "release", onMain)
    const named = await propose("deploy", { commit: "release" })
    expect((await carol.decide(named, "human")).disposition).toBe("accepted")
    // CI vouches for whatever the call names; the verifier does not vouch for a name.
    expect((await ciStatus(named, "release", "success")).disposition).toBe("accepted")
    const [v] = await runner.verify(named)
    expect(v).toMatchObject({ term: "merged", status: "failed", reason: expect.stringContaining("params.commit: 'release' is not a full commit id") })
    // An abbreviated id names a commit only while no other shares its prefix: refused as well.
    await expect(gitAncestry({ app: repo }, 5_000)({ repo: "app", commit: onMain.slice(0, 12), ref: "main" })).rejects.toThrow(/not a full commit id/)
    // The agent moves the branch to the unreviewed commit: the call still may not run.
    git("branch", "-f", "release", offMain)
    expect((await carol.decide(named, "human")).disposition).toMatch(/accepted|duplicate/)
    expect((await factsOf(named)).lifecycle).toBe("open")
    expect(effectsOf("deploy")).toBe(1)
    // What the verifier read for the full id names that id: it is what the call carries and runs.
    expect(await gitAncestry({ app: repo }, 5_000)({ repo: "app", commit: onMain, ref: "main" })).toMatchObject({ commit: onMain, commit_sha: onMain, is_ancestor: true })
  })

  it("no one but the term's verifier may supply its evidence: not the proposer, not the human witness", async () => {
    const heldId = await propose("deploy", { commit: onMain })
    const h = await factsOf(heldId)
    const forged = { held_id: heldId, decision: "evidence" as const, generation: h.generation, call_digest: h.call_digest, contract_digest: h.contract_digest, evidence: { term: "merged", kind: "git-ancestry", read: { commit: onMain, is_ancestor: true } } }
    // The agent's NATS user may not attest at all; the proposer's key over a witness connection is refused by the kernel.
    await expect(alice.attest({ ...forged, class: "agent" })).rejects.toThrow(/Permissions Violation/)
    const byProposer = await clientFor(witnessConn, "agent:alice").attest({ ...forged, class: "agent" })
    expect(byProposer).toMatchObject({ disposition: "invalid" })
    const byHuman = await carol.attest({ ...forged, class: "human" })
    expect(byHuman).toMatchObject({ disposition: "invalid" })
    expect(byHuman.reason).toMatch(/may not supply evidence for term 'merged'/)
  })

  it("a refund is released by the SQL read-back of a paid order, under a read-only role; an unpaid one stays held", async () => {
    const paid = await propose("http_post", { order_id: "o1" })
    const unpaid = await propose("http_post", { order_id: "o2" })
    for (const id of [paid, unpaid]) expect((await carol.decide(id, "human")).disposition).toBe("accepted")
    expect(await runner.verify(paid)).toEqual([{ term: "paid", status: "attested", disposition: "accepted", read: { connection: "orders", row_count: 1, rows: [{ status: "paid" }] } }])
    expect((await runner.verify(unpaid))[0]).toMatchObject({ status: "attested", read: { rows: [{ status: "pending" }] } })
    await eventually(async () => effectsOf("http_post") === 1)
    expect((await factsOf(unpaid)).lifecycle).toBe("open")
  })

  it("the read-back runs read-only: a term whose query writes reads nothing and attests nothing", async () => {
    const write = sqlReadback({ orders: ReadOnly }, 5_000)
    await expect(write({ connection: "orders", query: "update orders set status = 'paid' where id = $1 returning id", values: ["o2"] })).rejects.toThrow(/read-only transaction|permission denied/)
    await expect(sqlReadback({ orders: ReadOnly }, 5_000)({ connection: "elsewhere", query: "select 1" })).rejects.toThrow(/no connection 'elsewhere'/)
    expect(await admin(Db, async (c) => (await c.query("select status from orders where id = 'o2'")).rows)).toEqual([{ status: "pending" }])
    await expect(gitAncestry({ app: repo }, 5_000)({ repo: "/etc", commit: onMain, ref: "main" })).rejects.toThrow(/no repository '\/etc'/)
    await expect(gitAncestry({ app: repo }, 5_000)({ repo: "app", commit: "--output=/tmp/x", ref: "main" })).rejects.toThrow(/not options/)
  })

  it("a call held before the verifier starts is verified when it starts (its durable consumer reads from the first request)", async () => {
    const routeConn = await connect({ servers: nats.servers, user: "route", pass: "route-dev", ...inboxOptionOf("route") })
    const results: Array<string> = []
    try {
      const heldId = await propose("deploy", { commit: onMain })
      expect((await carol.decide(heldId, "human")).disposition).toBe("accepted")
      expect((await ciStatus(heldId, onMain, "success")).disposition).toBe("accepted")
      const late = await new VerifierRunner({
        client: clientFor(routeConn, "svc:verifier"),
        class: "verifier",
        checks: { "git-ancestry": gitAncestry({ app: repo }, 5_000) },
        timeoutMs: 10_000,
        onResult: (id, v) => void (id === heldId && results.push(v.status))
      }).start()
      try {
        await eventually(async () => (await factsOf(heldId))["outcome"] === "completed")
        expect(results).toContain("attested")
      } finally {
        await late.stop()
      }
    } finally {
      await routeConn.close()
    }
  })

  it("wk verifier runs as its own process and attests on the witness request, with no call from the test", async () => {
    const config = join(mkdtempSync(join(tmpdir(), "wk-verifier-")), "verifier.json")
    writeFileSync(config, JSON.stringify({ principal: "svc:verifier", git: { repos: { app: repo } } }))
    const child = spawn(process.execPath, [join(repoRoot, "runtime/cli/wk.mjs"), "verifier", "--config", config], { env: { ...process.env, NATS_URL: `nats://${nats.servers}` }, stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    child.stdout!.on("data", (d: Buffer) => (out += d.toString()))
    child.stderr!.on("data", (d: Buffer) => (out += d.toString()))
    try {
      await eventually(async () => out.includes("waiting for witness requests"), 60_000)
      const before = effectsOf("deploy")
      const heldId = await propose("deploy", { commit: onMain })
      expect((await carol.decide(heldId, "human")).disposition).toBe("accepted")
      expect((await ciStatus(heldId, onMain, "success")).disposition).toBe("accepted")
      await eventually(async () => effectsOf("deploy") === before + 1)
      // The verifier logs a term once the kernel has answered its attestation, so the log line
      // may reach this pipe after the effect it released.
      await eventually(async () => out.includes('"msg":"evidence term checked"'))
    } finally {
      child.kill("SIGINT")
    }
  }, 120_000)
})
