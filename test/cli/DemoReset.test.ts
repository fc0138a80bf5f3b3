import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import type { NatsConnection } from "@nats-io/transport-node"
import { join } from "node:path"
import { Kvm } from "@nats-io/kv"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import { DemoBankBucket, kvDemoBankLedger } from "../../runtime/executor/DemoBankLedger.js"
import { ExitCode } from "../../runtime/cli/Exit.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { connectAs } from "../support/Principals.js"
import { eventually } from "../support/Stream.js"
import { wkIn } from "../support/WkProcess.js"

// The demo bank runs dry after a few walk-throughs (each moves 2,750 out of alice's 10,000).
// `wk demo reset` puts every balance back, in the books and in the running bank, which follows
// the reset; applied transfers stay recorded by key, so a retried call moves no money again; a
// restarted bank reads the balances since the reset. Only the kernel user may reset: an agent's
// login is refused and the books stay as they were.

let nats: TestNats
let kernelConn: NatsConnection
let bank: DemoBank
let configDir: string
let wk: ReturnType<typeof wkIn>

/** One invoke of money_transfer as the kernel sends it. */
const invoke = async (key: string, amount: number) =>
  (await kernelConn.request(Subjects.toolInvoke("money_transfer"), JSON.stringify({ idempotency_key: key, args: { from: "alice", to: "bob", amount } }), { timeout: 5_000 })).json<{ ok: boolean; error?: string; result?: { transfer_id: string } }>()

/** Runs `f` (a `wk` run, which reads the environment when it starts) as the agent's NATS login. */
const asAgent = <A>(f: () => Promise<A>): Promise<A> => {
  const saved = { user: process.env["WK_NATS_USER"], pass: process.env["WK_NATS_PASS"] }
  process.env["WK_NATS_USER"] = "agent"
  process.env["WK_NATS_PASS"] = "agent-dev"
  const running = f()
  for (const [k, v] of [["WK_NATS_USER", saved.user], ["WK_NATS_PASS", saved.pass]] as const) {
    if (v === undefined) delete process.env[k]
    else process.env[k] = v
  }
  return running
}

/** The books' reset mark, or null before the first reset. */
const resetMark = async () => (await (await new Kvm(kernelConn).open(DemoBankBucket)).get("reset"))?.string() ?? null

beforeAll(async () => {
  nats = await startTestNats()
  configDir = mkdtempSync(join(tmpdir(), "wk-config-"))
  wk = wkIn(() => nats.servers, tmpdir(), configDir)
  kernelConn = await connectAs(nats.servers, "kernel")
  const bankConn = await connectAs(nats.servers, "bank")
  bank = (await new DemoBank({ ledger: await kvDemoBankLedger(kernelConn) }).restore()).serve(bankConn)
}, 120_000)

afterAll(async () => {
  bank?.stop()
  await kernelConn?.close()
  await nats?.dispose()
  rmSync(configDir, { recursive: true, force: true })
})

describe("wk demo reset", () => {
  it("puts every balance back in the running bank and its books; a retried key moves nothing again; only the kernel user may", async () => {
    expect(await invoke("k1", 6_000)).toMatchObject({ ok: true, result: { transfer_id: "t1" } })
    expect(await invoke("k2", 6_000)).toEqual({ ok: false, error: "insufficient funds in alice" })
    expect(bank.balance("alice")).toBe(4_000)

    // An agent's login may not write the books: refused, and no reset is recorded.
    const refused = await asAgent(() => wk("demo", "reset"))
    expect(refused.code, refused.stderr).toBe(ExitCode.unauthenticated)
    expect(refused.stderr).toMatch(/^wk: demo reset: NATS refused it for this user/)
    expect(await resetMark()).toBeNull()
    expect(bank.balance("alice")).toBe(4_000)

    const reset = await wk("demo", "reset")
    expect(reset.code, reset.stderr).toBe(0)
    expect(reset.stdout).toContain("demo bank reset")
    await eventually(async () => bank.balance("alice") === 10_000 && bank.balance("bob") === 10_000)

    expect(await invoke("k2", 6_000)).toMatchObject({ ok: true, result: { transfer_id: "t2" } })
    expect(bank.balance("alice")).toBe(4_000)
    const effects = bank.effects
    expect(await invoke("k1", 6_000)).toMatchObject({ ok: true, result: { transfer_id: "t1" } })
    expect(bank.effects).toBe(effects)

    // A bank restarted on the books reads the balances the transfers since the reset left.
    const restarted = await new DemoBank({ ledger: await kvDemoBankLedger(kernelConn) }).restore()
    expect(restarted.balance("alice")).toBe(4_000)
    expect(restarted.balance("bob")).toBe(16_000)
    expect([...restarted.byKey.keys()].sort()).toEqual(["k1", "k2"])
    restarted.stop()

    const again = await wk("demo", "reset")
    expect(again.code, again.stderr).toBe(0)
    expect(again.stdout).toContain("demo bank reset")
    await eventually(async () => bank.balance("alice") === 10_000 && bank.balance("bob") === 10_000)
    const after = await new DemoBank({ ledger: await kvDemoBankLedger(kernelConn) }).restore()
    expect(after.balance("alice")).toBe(10_000)
    after.stop()
  }, 120_000)
})
