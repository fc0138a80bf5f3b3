import { it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import type { Subscription } from "@nats-io/transport-node"
import { layerNats } from "../../runtime/ledger/Nats.js"
import { layerNatsLedger } from "../../runtime/ledger/LedgerPorts.js"
import { provision } from "../../runtime/ledger/Provision.js"
import { layerPolicyStore } from "../../runtime/ledger/NatsPolicyStore.js"
import { Subjects } from "../../runtime/schema/Subjects.js"
import { startTestNats, Roles, type TestNats } from "../support/TestNats.js"
import { connectAs } from "../support/Principals.js"
import { layerLoops, type Backend } from "./Backend.js"
import { loopProfiles, loopSuite } from "./LoopSuite.js"

// The same loop suite on a real nats-server of its own per test. JetStream's redelivery and
// request timeouts run on real time, so the waits here are real (bounded, on conditions).

let server: TestNats
const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** Real time is slower than the kernel time a test names when the box is loaded. */
const realBudget = (ms: number) => ms * 3 + 5_000

const natsBackend: Backend = {
  name: "nats",
  test: (name, config, body) =>
    it.scopedLive(
      name,
      () =>
        Effect.gen(function* () {
          server = yield* Effect.acquireRelease(Effect.promise(() => startTestNats()), (s) => Effect.promise(() => s.dispose()))
          const conn = layerNats({ servers: server.servers, ...Roles.kernel, name: "loops-test" })
          const provisioned = Layer.effectDiscard(provision()).pipe(Layer.provide(conn))
          const ledger = Layer.mergeAll(layerNatsLedger, layerPolicyStore(loopProfiles)).pipe(Layer.provide(provisioned), Layer.provideMerge(conn))
          yield* Effect.scoped(body).pipe(Effect.provide(layerLoops(ledger, { executorPaused: config.executorPaused ?? (() => false) })))
        }),
      120_000
    ),
  serve: (tool) =>
    Effect.gen(function* () {
      const nc = yield* Effect.acquireRelease(Effect.promise(() => connectAs(server.servers, "echo")), (c) => Effect.promise(() => c.close()))
      // A tool that is down has no subscription: its requests reach no one.
      let subs: Array<Subscription> = []
      const up = () => {
        subs = [
          nc.subscribe(Subjects.toolInvoke(tool.name), {
            callback: (err, msg) => {
              if (err !== null) return
              const req = JSON.parse(decoder.decode(msg.data)) as { idempotency_key: string; args: unknown }
              const turn = tool.invoke(req.idempotency_key, req.args)
              if (typeof turn === "object") msg.respond(encoder.encode(JSON.stringify(turn.reply)))
            }
          }),
          ...(tool.hasReadback
            ? [
                nc.subscribe(Subjects.toolReadback(tool.name), {
                  callback: (err, msg) => {
                    if (err !== null) return
                    const req = JSON.parse(decoder.decode(msg.data)) as { idempotency_key: string }
                    msg.respond(encoder.encode(JSON.stringify(tool.readback(req.idempotency_key))))
                  }
                })
              ]
            : [])
        ]
      }
      up()
      tool.onDownChange((down) => (down ? subs.forEach((s) => s.unsubscribe()) : up()))
      yield* Effect.promise(() => nc.flush())
    }),
  eventually: (probe, budgetMs) =>
    Effect.gen(function* () {
      const deadline = Date.now() + realBudget(budgetMs)
      for (;;) {
        const v = yield* probe
        if (v !== undefined) return v
        if (Date.now() > deadline) return yield* Effect.fail(new Error(`condition not met within ${realBudget(budgetMs)} ms`))
        yield* Effect.sleep(25)
      }
    }),
  connectSession: (sessionId) =>
    Effect.gen(function* () {
      const nc = yield* Effect.acquireRelease(Effect.promise(() => connectAs(server.servers, "agent")), (c) => Effect.promise(() => c.close().catch(() => undefined)))
      nc.subscribe(Subjects.presence(sessionId))
      yield* Effect.promise(() => nc.flush())
      return Effect.promise(() => nc.close().catch(() => undefined))
    })
}

loopSuite(natsBackend)
