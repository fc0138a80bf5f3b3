import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runSoak, type SoakReport } from "./Soak.js"
import { singleServer, type Topology } from "./Topology.js"

// The shortened soak of `npm run chaos`: a few agents and calls, two kernel processes
// SIGKILLed at random and right after effects (before the kernel records them), nats-server
// SIGKILLed and restarted on its file store, a hostile plugin pinned for a while, tool outages
// (the bank stops serving), and witnesses sending the same signed approval again across kills.
// Every call must end within its expiry plus a grace period. The full soak is `npm run chaos`
// (docs/operations.md).
let topology: Topology

beforeAll(async () => {
  topology = await singleServer()
})

afterAll(async () => {
  await topology?.dispose()
})

describe("soak with faults (shortened)", () => {
  it("every call ends once, effects equal completed transfers, no key twice, the audit passes", async () => {
    const lines: Array<string> = []
    let report: SoakReport | undefined
    try {
      report = await runSoak({
        topology,
        agents: 4,
        callsPerAgent: 8,
        kernels: 2,
        witnesses: 2,
        kernelKillEveryMs: 3000,
        killAfterEffectEvery: 5,
        natsFaultEveryMs: 10_000,
        hostileEveryMs: 15_000,
        hostileWindowMs: 1000,
        toolOutageEveryMs: 6000,
        toolOutageForMs: 1500,
        witnessRetryChance: 0.5,
        deadlineMs: 150_000,
        seed: Number(process.env["WK_SOAK_SEED"] ?? 20261203),
        log: (l) => lines.push(l)
      })
    } finally {
      console.log([...lines, JSON.stringify(report ?? "no report")].join("\n"))
    }
    const r = report!
    expect(r.problems).toEqual([])
    expect(r.calls.total).toBe(32)
    expect(r.faults.kernel_kills).toBeGreaterThan(0)
    expect(r.faults.tool_outages).toBeGreaterThan(0)
    expect(r.duplicates).toBe(0)
    expect(r.lost).toBe(0)
    expect(r.effects).toBe(r.completed_transfers)
    expect(r.audit.ok).toBe(true)
    expect(r.ok).toBe(true)
  }, 200_000)
})
