import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { kvDemoBankLedger } from "../../runtime/executor/DemoBankLedger.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { startKernel, type InProcessKernel } from "../support/InProcessKernel.js"
import { ExitCode } from "../../runtime/cli/Exit.js"
import { wkIn } from "../support/WkProcess.js"
import { Subjects } from "../../runtime/schema/Subjects.js"

// A tool that runs and reports a failure (the bank refusing a transfer for want of funds) is
// its own outcome: `tool_failed` in the reply, the delivery and held.get, and exit 8 from wk.
let nats: TestNats
let kernel: InProcessKernel
let toolConn: NatsConnection
let kernelConn: NatsConnection
let bank: DemoBank

const elsewhere = mkdtempSync(join(tmpdir(), "wk-cwd-"))
const configDir = mkdtempSync(join(tmpdir(), "wk-config-"))
const wk = wkIn(() => nats.servers, elsewhere, configDir)

beforeAll(async () => {
  nats = await startTestNats()
  kernel = await startKernel(nats.servers, [testProfile()])
  toolConn = await connectAs(nats.servers, "bank")
  kernelConn = await connectAs(nats.servers, "kernel")
  // Every account opens with 100: a transfer of 500 is refused by the bank.
  bank = await new DemoBank({ openingBalance: 100, ledger: await kvDemoBankLedger(kernelConn) }).restore()
  bank.serve(toolConn)
}, 120_000)

afterAll(async () => {
  bank?.stop()
  await kernel?.stop()
  await Promise.all([toolConn, kernelConn].map((c) => c?.close()))
  await nats?.dispose()
  rmSync(elsewhere, { recursive: true, force: true })
  rmSync(configDir, { recursive: true, force: true })
})

describe("a tool failure is its own outcome", () => {
  it("wk propose of a transfer the bank refuses says tool_failed and exits 8; --json carries outcome tool_failed and ok false", async () => {
    const r = await wk("propose", "money_transfer", '{"from":"poor-1","to":"shop","amount":500}')
    expect(r.stderr).toBe("")
    expect(r.code).toBe(ExitCode.toolFailed)
    expect(r.stdout).toMatch(/^tool_failed: .*insufficient funds in poor-1/)
    const j = await wk("propose", "money_transfer", '{"from":"poor-2","to":"shop","amount":500}', "--json")
    expect(j.code).toBe(ExitCode.toolFailed)
    expect(JSON.parse(j.stdout)).toMatchObject({ status: 200, outcome: "tool_failed", ok: false, error: "insufficient funds in poor-2" })
    expect(bank.effects).toBe(0)
  }, 120_000)

  it("a held transfer the bank refuses once approved: delivered as tool_failed, held.get says so, wk result exits 8", async () => {
    const agentConn = await connectAs(nats.servers, "agent")
    const witnessConn = await connectAs(nats.servers, "witness")
    try {
      const alice = clientFor(agentConn, "agent:alice")
      const r = (await alice.propose({ session_id: "s-fail", turn_id: "t1", call_id: "held-fail", tool: "money_transfer", args: { from: "poor-3", to: "shop", amount: 2_500 } })) as { status: number; held_id: string }
      expect(r.status).toBe(202)
      const carol = clientFor(witnessConn, "user:carol")
      const a = await carol.decide(r.held_id, "human")
      expect(a.status).toBeLessThan(300)
      const d = await alice.result(r.held_id, { sessionId: "s-fail", timeoutMs: 60_000 })
      expect(d).toMatchObject({ outcome: "tool_failed", ok: false, result: { error: "insufficient funds in poor-3" } })
      const got = await alice.get(r.held_id)
      expect(got.held).toMatchObject({ lifecycle: "completed", outcome: "tool_failed", tool_ok: false })
      const res = await wk("result", r.held_id, "--wait", "--timeout-ms", "30000")
      expect(res.code).toBe(ExitCode.toolFailed)
      expect(res.stdout).toMatch(/^tool_failed /)
    } finally {
      await Promise.all([agentConn.close(), witnessConn.close()])
    }
  }, 180_000)

  it("the demo bank's balances and applied keys survive a restart (its books are in KV)", async () => {
    const enc = new TextEncoder()
    const invoke = async (key: string, args: Record<string, unknown>) =>
      JSON.parse(new TextDecoder().decode((await kernelConn.request(Subjects.toolInvoke("money_transfer"), enc.encode(JSON.stringify({ idempotency_key: key, args })), { timeout: 10_000 })).data)) as { ok: boolean; result?: { balance_from: number } }
    const first = await invoke("restart-1", { from: "rich", to: "shop-r", amount: 40 })
    expect(first).toMatchObject({ ok: true, result: { balance_from: 60 } })
    bank.stop()
    bank = await new DemoBank({ openingBalance: 100, ledger: await kvDemoBankLedger(kernelConn) }).restore()
    bank.serve(toolConn)
    await toolConn.flush() // the bank's subscription reaches the server before the next request
    expect(bank.balance("rich")).toBe(60)
    expect(bank.balance("shop-r")).toBe(140)
    // The same key again is the same transfer, not a second one; a new key sees the kept balance.
    expect(await invoke("restart-1", { from: "rich", to: "shop-r", amount: 40 })).toMatchObject({ ok: true, result: { balance_from: 60 } })
    expect(await invoke("restart-2", { from: "rich", to: "shop-r", amount: 40 })).toMatchObject({ ok: true, result: { balance_from: 20 } })
    expect(bank.effects).toBe(1)
  }, 120_000)
})
