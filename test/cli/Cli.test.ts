import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { execFile, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventually } from "../support/Stream.js"
import { devPublicKey } from "../../runtime/client/DevKeys.js"
import { ExitCode } from "../../runtime/cli/Exit.js"
import { repoRoot } from "../../runtime/cli/Paths.js"

// The wk bin as a child process, started from a folder outside the repository (it must not
// depend on the current directory), against a real nats-server and an in-process kernel.
let nats: TestNats
let kernel: InProcessKernel
let bank: DemoBank
let agentConn: NatsConnection
let toolConn: NatsConnection
let alice: WitnessClient

const run = promisify(execFile)
const elsewhere = mkdtempSync(join(tmpdir(), "wk-cwd-"))
const configDir = mkdtempSync(join(tmpdir(), "wk-config-"))
const url = () => `nats://${nats.servers}`
const env = (extra: Record<string, string> = {}) => {
  const e: Record<string, string | undefined> = { ...process.env, NATS_URL: url(), WK_CONFIG_DIR: configDir, ...extra }
  delete e["WK_CONTEXT"]
  return e
}
const bin = join(repoRoot, "runtime", "cli", "wk.mjs")
const wkArgs = (args: ReadonlyArray<string>) => [bin, ...args]
const wkWith = async (extra: Record<string, string>, ...args: Array<string>) => {
  try {
    const r = await run(process.execPath, wkArgs(args), { cwd: elsewhere, env: env(extra), timeout: 60_000 })
    return { code: 0, stdout: r.stdout, stderr: r.stderr }
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string }
    return { code: x.code, stdout: x.stdout, stderr: x.stderr }
  }
}
const wk = (...args: Array<string>) => wkWith({}, ...args)

let n = 0
const held = async (amount = 2_500) => {
  const r = (await alice.propose({ session_id: "s-cli", turn_id: "t1", call_id: `cli${++n}`, tool: "money_transfer", args: { from: `cli-${n}`, to: "shop", amount } })) as { status: number; held_id: string; call_digest: string }
  expect(r.status).toBe(202)
  return r
}

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [testProfile()])
  toolConn = await connectAs(nats.servers, "bank")
  bank = new DemoBank().serve(toolConn)
  agentConn = await connectAs(nats.servers, "agent")
  alice = clientFor(agentConn, "agent:alice")
})

afterAll(async () => {
  await kernel?.stop()
  await Promise.all([agentConn, toolConn].map((c) => c?.close()))
  await nats?.dispose()
  rmSync(elsewhere, { recursive: true, force: true })
  rmSync(configDir, { recursive: true, force: true })
})

describe("wk CLI", () => {
  it("held ls lists a parked call; held show --json has its digests; status --json reports streams, epoch, open calls", async () => {
    const h = await held()
    const ls = await wk("held", "ls", "--json")
    expect(ls.code).toBe(0)
    expect(JSON.parse(ls.stdout)).toEqual(expect.arrayContaining([expect.objectContaining({ held_id: h.held_id, state: "open/unsatisfied", tool: "money_transfer" })]))
    expect((await wk("held", "ls", "--principal", "agent:bob")).stdout).toContain("no open held calls")
    const show = await wk("held", "show", h.held_id, "--json")
    expect(JSON.parse(show.stdout)).toMatchObject({ held_id: h.held_id, call_digest: h.call_digest, lifecycle: "open" })
    expect((await wk("held", "show", h.held_id)).stdout).toContain(`call_digest ${h.call_digest}`)
    const status = JSON.parse((await wk("status", "--json")).stdout) as Record<string, unknown>
    expect(status).toMatchObject({ policy_epoch: 1, open_held_calls: { by_state: { "open/unsatisfied": expect.any(Number) } } })
    expect((status["streams"] as Array<{ name: string }>).map((s) => s.name)).toEqual(expect.arrayContaining(["WK_EVENTS", "WK_SESSIONS", "WK_WAKES"]))
    expect((status["kernels"] as Array<unknown>).length).toBe(1)
    expect(status["controller_lag"]).toEqual(expect.any(Number))
    expect((await wk("status")).stdout).toMatch(/^health +1 kernel seen \(v\S+\), controller lag \d+ wakes? waiting or in progress$/m)
  })

  it("watch follows a call to its end while attest --yes releases it: one bank effect", async () => {
    const h = await held(2_600)
    const effects = bank.effects
    const watch = spawn(process.execPath, wkArgs(["held", "watch", h.held_id, "--timeout-ms", "40000"]), { cwd: elsewhere, env: env() })
    // Listen for the close now (after exit and once its output is drained): the watch can end before the attest process has finished exiting.
    const exited = new Promise<number | null>((resolve) => watch.on("close", resolve))
    let out = ""
    watch.stdout.on("data", (d) => (out += String(d)))
    await eventually(async () => out.includes("call.held"), 30_000)
    const attest = await wk("attest", h.held_id, "--principal", "user:carol", "--class", "human", "--yes")
    expect(attest.code).toBe(0)
    expect(attest.stdout).toContain(`call_digest      ${h.call_digest}`)
    expect(attest.stdout).toContain('"disposition":"accepted"')
    const code = await exited
    expect(code).toBe(0)
    for (const t of ["attestation.accepted", "readiness.changed", "effect.recorded", "result.admitted", "delivery.published"]) expect(out).toContain(t)
    expect(out).toContain("ended completed")
    expect(bank.effects - effects).toBe(1)
  })

  it("attest without --yes and without a terminal signs nothing; cancel ends a call", async () => {
    const h = await held(2_700)
    const refused = await wk("attest", h.held_id, "--principal", "user:carol", "--class", "human")
    expect(refused.code).not.toBe(0)
    expect(refused.stderr).toContain("not signed")
    const c = await wk("cancel", h.held_id, "--principal", "agent:alice", "--reason", "changed my mind")
    expect(c).toMatchObject({ code: 0 })
    expect(c.stdout).toContain(`cancelled ${h.held_id}`)
    expect((await alice.get(h.held_id)).held).toMatchObject({ lifecycle: "cancelled" })
  })

  it("bad input and an unreachable server give one-line errors and a non-zero exit", async () => {
    const bad = await wk("held", "show", "nope")
    expect(bad.code).not.toBe(0)
    expect(bad.stderr.trim().split("\n")).toHaveLength(1)
    expect(bad.stderr).toContain("held_id")
    const missing = await wk("held", "show", "h_" + "0".repeat(32))
    expect(missing.stderr).toContain("wk held ls")
    const r = await wkWith({ NATS_URL: "nats://127.0.0.1:1" }, "status")
    expect(r.code).toBe(ExitCode.unreachable)
    expect(r.stderr).toContain("start the kernel with `npm start`")
  })

  it("propose: the exit code is the outcome (completed 0, held 3, denied 4, unauthenticated 6); --json is the reply", async () => {
    const done = await wk("propose", "money_transfer", '{"from":"cli-a","to":"shop","amount":250}')
    expect(done.code, done.stderr).toBe(ExitCode.ok)
    expect(done.stdout).toMatch(/^completed \(held_id h_[0-9a-f]{32}\)/)
    const held = await wk("propose", "money_transfer", '{"from":"cli-b","to":"shop","amount":2500}', "--json")
    expect(held.code).toBe(ExitCode.held)
    expect(JSON.parse(held.stdout)).toMatchObject({ status: 202, outcome: "held" })
    const denied = await wk("propose", "money_transfer", '{"from":"cli-c","to":"shop","amount":500000}')
    expect(denied.code).toBe(ExitCode.denied)
    expect(denied.stdout).toMatch(/^denied/)
    const stranger = await wk("propose", "money_transfer", '{"from":"cli-d","to":"shop","amount":5}', "--as", "agent:nobody", "--json")
    expect(stranger.code).toBe(ExitCode.unauthenticated)
    expect(JSON.parse(stranger.stdout)).toMatchObject({ status: 401 })
    const gone = await wk("cancel", "h_" + "0".repeat(32), "--principal", "agent:alice")
    expect(gone.code).toBe(ExitCode.refused)
  })

  it("a wrong NATS password says so (exit 6), not 'start the kernel'; a usage error is one line, exit 2", async () => {
    const r = await wkWith({ NATS_URL: `nats://agent:wrong@${nats.servers}` }, "propose", "money_transfer", '{"amount":1}')
    expect(r.code).toBe(ExitCode.unauthenticated)
    expect(r.stderr).toContain("refused user 'agent' and its password")
    expect(r.stderr).not.toContain("npm start")
    for (const args of [["propose", "money_transfer"], ["held", "show"], ["propose", "money_transfer", "{not json"], ["frobnicate"], ["held", "ls", "--limit", "many"]]) {
      const u = await wk(...args)
      expect(u.code, args.join(" ")).toBe(ExitCode.usage)
      expect(u.stderr.trim().split("\n"), args.join(" ")).toHaveLength(1)
      expect(u.stderr).toMatch(/^wk: /)
      expect(u.stderr).not.toContain("[object Object]")
    }
  })

  it("every command `wk --help` lists loads and answers its own --help (the registry names each module and export)", async () => {
    const root = await wk("--help")
    const names = [...root.stdout.split("Commands:\n")[1]!.split("\n\n")[0]!.matchAll(/^  (\S+)/gm)].map((m) => m[1]!)
    expect(names).toEqual(expect.arrayContaining(["start", "propose", "held", "status", "mcp", "nats"]))
    for (const name of names) {
      const h = await wk(name, "--help")
      expect(h.code, `${name}: ${h.stderr}`).toBe(0)
      expect(h.stdout, name).toContain(`Usage: wk ${name}`)
    }
  }, 300_000)

  it("help is plain text within 100 columns, names the command path, and describes every option", async () => {
    for (const path of [[], ["propose"], ["held", "ls"], ["attest"], ["result"], ["audit", "replay"], ["context", "add"], ["status"]]) {
      const h = await wkWith({ FORCE_COLOR: "1" }, ...path, "--help")
      expect(h.code, path.join(" ")).toBe(0)
      expect(h.stdout).not.toContain("\x1b[")
      for (const line of h.stdout.split("\n")) expect(line.length, `${path.join(" ")}: ${line}`).toBeLessThanOrEqual(100)
      expect(h.stdout).toContain(`Usage: wk${path.map((p) => ` ${p}`).join("")}`)
      expect(h.stdout).not.toContain("(no description)")
      expect(h.stdout).not.toContain("A user-defined piece of text")
      expect(h.stdout).toContain("--server URL")
    }
  })

  it("contexts: add --use saves the server; later commands use it with no NATS_URL; --server and --context override", async () => {
    const add = await wk("context", "add", "test", "--server", url(), "--use")
    expect(add.code, add.stderr).toBe(0)
    const ls = await wk("context", "ls")
    expect(ls.stdout).toMatch(/^\* test\s+nats:\/\//m)
    const noUrl = { NATS_URL: "" }
    const status = await wkWith(noUrl, "status", "--json")
    expect(status.code, status.stderr).toBe(0)
    expect(JSON.parse(status.stdout)).toMatchObject({ policy_epoch: 1 })
    expect((await wkWith(noUrl, "status", "--server", "nats://127.0.0.1:1")).code).toBe(ExitCode.unreachable)
    const missing = await wkWith(noUrl, "status", "--context", "nope")
    expect(missing.code).not.toBe(0)
    expect(missing.stderr).toContain("no context 'nope'")
    expect((await wk("context", "rm", "test")).code).toBe(0)
  })

  it("result --wait prints the delivered result once the witness approves; ack acknowledges it; propose --wait exits with the final outcome; dev-key is the registered key", async () => {
    const h = await held(2_800)
    const early = await wk("result", h.held_id)
    expect(early.code).toBe(ExitCode.held)
    const waiting = wk("result", h.held_id, "--wait", "--timeout-ms", "40000", "--json")
    expect((await wk("attest", h.held_id, "--principal", "user:carol", "--class", "human", "--yes")).code).toBe(0)
    const r = await waiting
    expect(r.code, r.stderr).toBe(ExitCode.ok)
    expect(JSON.parse(r.stdout)).toMatchObject({ held_id: h.held_id, outcome: "completed" })
    const ack = await wk("ack", h.held_id, "--as", "agent:alice")
    expect(ack.code, ack.stderr).toBe(0)
    expect(ack.stdout).toContain(`acknowledged ${h.held_id}`)
    // propose --wait: held, then the delivered result once carol approves; the exit code is the final outcome.
    // It prints the held reply first, then waits: attest once that line is out.
    const proposer = spawn(process.execPath, wkArgs(["propose", "money_transfer", '{"from":"cli-w","to":"shop","amount":2900}', "--wait", "--timeout-ms", "60000"]), { cwd: elsewhere, env: env() })
    let printed = ""
    proposer.stdout.on("data", (d) => (printed += String(d)))
    const proposing = new Promise<{ code: number | null; stdout: string }>((resolve) => proposer.on("close", (code) => resolve({ code, stdout: printed })))
    const waitingId = await eventually(async () => /^held: .*\(held_id (h_[0-9a-f]{32})\)/.exec(printed)?.[1], 40_000)
    expect((await wk("attest", waitingId, "--principal", "user:carol", "--class", "human", "--yes")).code).toBe(0)
    const proposed = await proposing
    expect(proposed.code, proposed.stdout).toBe(ExitCode.ok)
    expect(proposed.stdout).toMatch(/^held: /)
    expect(proposed.stdout).toMatch(/^completed h_[0-9a-f]{32}: /m)
    const key = await wk("dev-key", "user:carol", "--json")
    expect(JSON.parse(key.stdout)).toMatchObject({ type: "ed25519", public_key: devPublicKey("user:carol") })
  })
})
