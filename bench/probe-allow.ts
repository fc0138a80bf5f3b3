// Profiling probe (not part of `npm run bench`): N ALLOW calls from C concurrent agents against K kernel processes,
// after 300 warm-up calls; prints rate, p50 and kernel CPU per call from /proc. NODE_ARGS passes node flags to the kernels,
// e.g. N=2000 NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" npx tsx bench/probe-allow.ts
import { DemoBank } from "../runtime/executor/DemoBank.js"
import { startTestNats } from "../test/support/TestNats.js"
import { clientFor, connectAs } from "../test/support/Principals.js"
import { profileDir, startKernelProcess } from "../test/support/KernelProcess.js"
import { benchProfile } from "./BenchProfile.js"
import { execSync } from "node:child_process"

const N = Number(process.env["N"] ?? 1000)
const C = Number(process.env["C"] ?? 1)
const nats = await startTestNats()
const tool = await connectAs(nats.servers, "bank")
const bank = new DemoBank({ openingBalance: 1e12 }).serve(tool)
const K = Number(process.env["K"] ?? 1)
const dir = profileDir([benchProfile()])
const kernels = await Promise.all(Array.from({ length: K }, () => startKernelProcess(nats.servers, dir, {}, (process.env["NODE_ARGS"] ?? "").split(" ").filter((s) => s))))
const kernel = kernels[0]!
const agent = await connectAs(nats.servers, "agent")
const alice = clientFor(agent, "agent:alice")
let seq = 0
const call = () => ({ session_id: "p", turn_id: "t", call_id: `c${++seq}`, tool: "money_transfer", args: { from: `a${seq}`, to: "b", amount: 10 } })
const cpu = () => kernels.reduce((t, k) => { const f = execSync(`cat /proc/${k.pid}/stat`).toString().split(") ")[1]!.split(" "); return t + (Number(f[11]) + Number(f[12])) / 100 }, 0)
for (let i = 0; i < 300; i++) await alice.propose(call())
const c0 = Number(cpu())
const t0 = performance.now()
let left = N
const lat: number[] = []
await Promise.all(Array.from({ length: C }, async () => { while (left-- > 0) { const s = performance.now(); const r = await alice.propose(call()); lat.push(performance.now() - s); if (r.status !== 200) throw new Error(JSON.stringify(r)) } }))
const wall = performance.now() - t0
const c1 = Number(cpu())
lat.sort((a, b) => a - b)
console.log(`K=${K} N=${N} C=${C} wall ${wall.toFixed(0)} ms, ${(N / wall * 1000).toFixed(0)}/s, p50 ${lat[Math.floor(N / 2)]!.toFixed(2)} ms, kernel cpu ~${((c1 - c0) * 1000 / N).toFixed(2)} ms/call `)
await Promise.all(kernels.map((k) => k.stop()))
bank.stop()
await agent.close(); await tool.close()
await nats.dispose()
