import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { execFile, spawn } from "node:child_process"
import { promisify } from "node:util"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { eventually } from "../support/Stream.js"

// The wk CLI as a child process against a real nats-server and an in-process kernel.
let nats: TestNats
let kernel: InProcessKernel
let bank: DemoBank
let agentConn: NatsConnection
let toolConn: NatsConnection
let alice: WitnessClient

const run = promisify(execFile)
const env = () => ({ ...process.env, NATS_URL: nats.servers.includes("://") ? nats.servers : `nats://${nats.servers}` })
const wkArgs = (args: ReadonlyArray<string>) => ["tsx", "--disable-warning=ExperimentalWarning", "runtime/cli/main.ts", ...args]
const wk = async (...args: Array<string>) => {
  try {
    const r = await run("npx", wkArgs(args), { env: env(), timeout: 60_000 })
    return { code: 0, stdout: r.stdout, stderr: r.stderr }
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string }
    return { code: x.code, stdout: x.stdout, stderr: x.stderr }
  }
}

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
  })

  it("watch follows a call to its end while attest --yes releases it: one bank effect", async () => {
    const h = await held(2_600)
    const effects = bank.effects
    const watch = spawn("npx", wkArgs(["held", "watch", h.held_id, "--timeout-ms", "40000"]), { env: env() })
    // Listen for the exit now: the watch can end before the attest process has finished exiting.
    const exited = new Promise<number | null>((resolve) => watch.on("exit", resolve))
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
    const r = await run("npx", wkArgs(["status"]), { env: { ...process.env, NATS_URL: "nats://127.0.0.1:1" }, timeout: 60_000 }).catch((e: { code: number; stderr: string }) => e)
    expect((r as { code: number }).code).not.toBe(0)
    expect((r as { stderr: string }).stderr).toContain("start the kernel with `npm start` or set NATS_URL")
  })
})
