import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { NatsConnection } from "@nats-io/transport-node"
import { DemoBank } from "../../runtime/executor/DemoBank.js"
import type { WitnessClient } from "../../runtime/client/Client.js"
import { startTestNats, type TestNats } from "../support/TestNats.js"
import { clientFor, connectAs, testProfile } from "../support/Principals.js"
import { profileDir, startKernelProcess, type KernelProcess } from "../support/KernelProcess.js"
import { eventually } from "../support/Stream.js"

// Shortened soak: held transfers approved concurrently while kernel processes are SIGKILLed
// between dispatch and record (the bank's onApplied hook) and restarted. Afterwards every call
// has completed once, and the bank's effects equal the completed calls.
const CALLS = Number(process.env["WK_SOAK_CALLS"] ?? 12)
let nats: TestNats
let conns: Array<NatsConnection> = []
let alice: WitnessClient
let carol: WitnessClient
let profiles: string
const kernels: Array<KernelProcess> = []
const env = { WK_LEASE_MS: "1500", WK_TOOL_TIMEOUT_MS: "1000" }
const profile = testProfile()
// Shortened CI variant; not yet passing (see docs/operations.md), so it runs only when asked.
const enabled = process.env["WK_SOAK"] === "1"
type Held = { status: number; held_id: string; call_digest: string; generation: number; witness_request: { contract_digest: string } }

beforeAll(async () => {
  nats = await startTestNats()
  profiles = profileDir([profile])
  conns = await Promise.all((["agent", "witness", "tool"] as const).map((r) => connectAs(nats.servers, r)))
  alice = clientFor(conns[0]!, "agent:alice")
  carol = clientFor(conns[1]!, "user:carol")
})

afterAll(async () => {
  if (process.env["WK_SOAK_DEBUG"]) kernels.forEach((k, i) => console.log(`--- kernel ${i}\n${k.output().slice(-1500)}`))
  await Promise.all(kernels.map((k) => k.kill()))
  await Promise.all(conns.map((c) => c.close()))
  await nats?.dispose()
})

describe.skipIf(!enabled)("soak (shortened)", () => {
  it(`${CALLS} held transfers with kernels SIGKILLed after effect, before record: one effect each, none lost`, async () => {
    const live = new Set<KernelProcess>()
    const start = async () => {
      const k = await startKernelProcess(nats.servers, profiles, env)
      kernels.push(k)
      live.add(k)
      return k
    }
    await start()
    await start()
    let faults = 0
    const perKey = new Map<string, number>()
    const bank = new DemoBank({
      onApplied: async (_t, key) => {
        perKey.set(key, (perKey.get(key) ?? 0) + 1)
        // Every third effect: crash a kernel (the one dispatching is among the live ones).
        if (perKey.size % 3 !== 0 || live.size === 0) return
        faults++
        for (const k of [...live]) {
          live.delete(k)
          process.kill(k.pid, "SIGKILL")
        }
        void start()
      }
    }).serve(conns[2]!)
    const t0 = Date.now()
    const held: Array<Held> = []
    for (let i = 0; i < CALLS; i++) {
      const h = (await eventually(async () => {
        const r = (await alice.propose({ session_id: "s-soak", turn_id: "t1", call_id: `soak${i}`, tool: "money_transfer", args: { from: `acct-s${i}`, to: "shop", amount: 2000 + i } } as never)) as Held
        return r.status === 202 ? r : undefined
      }, 30_000, 200))
      held.push(h)
    }
    console.log(`proposed ${held.length}; kernels started ${kernels.length}, live ${live.size}`)
    await Promise.all(held.map((h) => eventually(async () => (await carol.attest({ held_id: h.held_id, generation: h.generation, call_digest: h.call_digest, contract_digest: h.witness_request.contract_digest, class: "human", decision: "approve" })).status < 300 || undefined, 30_000, 200)))
    const states = new Map<string, unknown>()
    await eventually(async () => {
      for (const h of held) states.set(h.held_id, (await alice.get(h.held_id)).held?.["lifecycle"])
      return [...states.values()].every((s) => s === "completed") || undefined
    }, 60_000, 300).finally(async () => { console.log(JSON.stringify({ faults, effects: bank.effects, perKey: [...perKey.values()], lifecycles: [...states.values()] })); for (const [id, s] of states) if (s !== "completed") console.log("STUCK", JSON.stringify(await alice.get(id)).slice(0, 3000)) })
    const elapsed = Date.now() - t0
    await new Promise((r) => setTimeout(r, 500))
    const duplicates = [...perKey.values()].filter((c) => c > 1).length
    console.log(JSON.stringify({ calls: CALLS, faults, completed: held.length, effects: bank.effects, duplicates, lost: CALLS - bank.effects, elapsed_ms: elapsed }))
    expect(faults).toBeGreaterThan(0)
    expect(bank.effects).toBe(CALLS)
    expect(duplicates).toBe(0)
  }, 150_000)
})
