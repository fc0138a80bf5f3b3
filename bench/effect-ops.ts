// Effect operations per call: the kernel runs in this process under a counting supervisor with
// op supervision on, so every operation its fibers evaluate (each `flatMap`, `sync`, `async`,
// service lookup ...) is counted, and every fiber it starts. The request fibers of the protocol
// service and everything they fork inherit both from the runtime the service captures.
import { Effect, Fiber, ManagedRuntime, RuntimeFlags, RuntimeFlagsPatch, Supervisor } from "effect"
import { join } from "node:path"
import { layerKernel, publishLocalPlugins, runKernel } from "../runtime/Kernel.js"
import { repoRoot } from "../runtime/cli/Paths.js"
import { DemoBank } from "../runtime/executor/DemoBank.js"
import { Subjects } from "../runtime/schema/Subjects.js"
import { startTestNats, Roles } from "../test/support/TestNats.js"
import { clientFor, connectAs } from "../test/support/Principals.js"
import { benchProfile } from "./BenchProfile.js"
import { row, type Row } from "./Table.js"

/** Counts the operations and the fibers of every fiber it supervises. */
class OpCounter extends Supervisor.AbstractSupervisor<void> {
  ops = 0
  fibers = 0
  value = Effect.void
  override onStart() {
    this.fibers++
  }
  override onEffect() {
    this.ops++
  }
}

const Quick = process.env["WK_BENCH_QUICK"] === "1"
const Calls = Quick ? 50 : 300

let seq = 0
const call = (amount: number, session: string) => ({ session_id: session, turn_id: "t", call_id: `o${++seq}`, tool: "money_transfer", args: { from: `a${seq}`, to: "b", amount } })

/**
 * Effect operations and fibers per sequential ALLOW call and per held call (propose, hold,
 * attest, release, delivery), on the bench profile. Sequential, so what is counted between two
 * calls is the calls' own work plus the kernel's background loops over the same time (a few
 * operations per timer tick; the controller's consumer loop runs outside the supervised runtime).
 * The floor is what "Effect at the edges" asks: one fiber per request.
 */
export const runEffectOpsBench = async (): Promise<Array<Row>> => {
  const nats = await startTestNats()
  const bankConn = await connectAs(nats.servers, "bank")
  const bank = new DemoBank({ openingBalance: 1e12 }).serve(bankConn)
  const agent = await connectAs(nats.servers, "agent")
  const witness = await connectAs(nats.servers, "witness")
  const counter = new OpCounter()
  const runtime = ManagedRuntime.make(layerKernel({ nats: { servers: nats.servers, ...Roles.kernel }, profiles: [benchProfile()] }))
  try {
    await runtime.runPromise(publishLocalPlugins(join(repoRoot, "plugins")))
    const supervised = Effect.scoped(Effect.zipRight(runKernel, Effect.never)).pipe(
      Effect.supervised(counter),
      Effect.withRuntimeFlagsPatch(RuntimeFlagsPatch.enable(RuntimeFlags.OpSupervision))
    )
    const fiber = await runtime.runPromise(Effect.forkDaemon(supervised))
    await runtime.runPromise(Effect.sleep(100))
    const alice = clientFor(agent, "agent:alice")
    const carol = clientFor(witness, "user:carol")
    const allow = async () => {
      const r = await alice.propose(call(10, "ops"))
      if (r.status !== 200) throw new Error(`effect-ops ALLOW got ${JSON.stringify(r)}`)
    }
    const delivered = new Map<string, () => void>()
    const sub = agent.subscribe(Subjects.sessionResults("ops-held"), { callback: (_e, m) => delivered.get(m.json<{ held_id: string }>().held_id)?.() })
    await agent.flush()
    const held = async () => {
      const h = (await alice.propose(call(5000, "ops-held"))) as { held_id: string; generation: number; call_digest: string; witness_request: { contract_digest: string } }
      const done = new Promise<void>((r) => delivered.set(h.held_id, r))
      const a = await carol.attest({ held_id: h.held_id, generation: h.generation, call_digest: h.call_digest, contract_digest: h.witness_request.contract_digest, class: "human", decision: "approve" })
      if (a.disposition !== "accepted") throw new Error(`effect-ops release: ${JSON.stringify(a)}`)
      await done
    }
    const perCall = async (f: () => Promise<void>, n: number) => {
      for (let i = 0; i < 20; i++) await f() // warm-up, excluded
      counter.ops = 0
      counter.fibers = 0
      for (let i = 0; i < n; i++) await f()
      return { ops: counter.ops / n, fibers: counter.fibers / n }
    }
    const a = await perCall(allow, Calls)
    const h = await perCall(held, Math.max(20, Calls / 5))
    sub.unsubscribe()
    await runtime.runPromise(Fiber.interrupt(fiber))
    return [
      row("Effect operations per ALLOW call (kernel, sequential)", a.ops, 0, "ops"),
      row("fibers started per ALLOW call vs one per request", a.fibers, 1, "fibers"),
      row("Effect operations per held call (propose, hold, attest, release, delivery)", h.ops, 0, "ops"),
      row("fibers started per held call vs one per request (propose, attest)", h.fibers, 2, "fibers")
    ]
  } finally {
    await runtime.dispose()
    bank.stop()
    await Promise.all([agent, witness, bankConn].map((c) => c.close()))
    await nats.dispose()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { printTable } = await import("./Table.js")
  printTable(await runEffectOpsBench())
}
