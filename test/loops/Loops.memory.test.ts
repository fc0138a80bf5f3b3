import { it } from "@effect/vitest"
import { type Context, Effect, Layer, TestClock } from "effect"
import { layerMemoryLedger } from "../../runtime/ledger/memory/MemoryLedger.js"
import { MemoryTools } from "../../runtime/ledger/memory/MemoryToolClient.js"
import { MemoryPresence } from "../../runtime/ledger/memory/MemoryPresenceMarks.js"
import { NoResponders, ToolUnanswered, type InvokeReply } from "../../runtime/ledger/ToolClient.js"
import { layerMemoryPolicyStore } from "../../runtime/policy/MemoryPolicyStore.js"
import { layerLoops, layerNoNats, type Backend } from "./Backend.js"
import { loopProfiles, loopSuite } from "./LoopSuite.js"

// The loops on the memory ledger: time is TestClock's. The kernel reads every time it decides on
// from Effect's `Clock` (the drive's clock service), so nothing else needs to move.
const Origin = Date.parse("2026-06-01T00:00:00.000Z")

const Step = 50
const advance = (ms: number) => TestClock.adjust(ms)
/** Lets forked fibers and promise chains run (no kernel time passes). */
const turns = Effect.promise(() => new Promise<void>((r) => setImmediate(r))).pipe(Effect.repeatN(3))

// The running test's tool table and sessions.
let tools: Context.Tag.Service<typeof MemoryTools>
let presence: Context.Tag.Service<typeof MemoryPresence>

const memory: Backend = {
  name: "memory",
  test: (name, config, body) =>
    it.scoped(name, () =>
      Effect.gen(function* () {
        yield* TestClock.setTime(Origin)
        yield* Effect.gen(function* () {
          tools = yield* MemoryTools
          presence = yield* MemoryPresence
          yield* Effect.scoped(body)
        }).pipe(
          Effect.provide(layerLoops(Layer.mergeAll(layerMemoryLedger, layerMemoryPolicyStore(loopProfiles), layerNoNats), { executorPaused: config.executorPaused ?? (() => false) }))
        )
      })
    ),
  serve: (tool) =>
    Effect.sync(() =>
      tools.serve(tool.name, {
        invoke: (req) =>
          Effect.suspend((): Effect.Effect<InvokeReply, ToolUnanswered | NoResponders> => {
            if (tool.down) return Effect.fail(new NoResponders({ tool: tool.name }))
            const turn = tool.invoke(req.idempotencyKey, req.args)
            return turn === "hang" ? Effect.never : turn === "lost" ? Effect.fail(new ToolUnanswered({ tool: tool.name, reason: "the reply was lost" })) : Effect.succeed(turn.reply)
          }),
        ...(tool.hasReadback ? { readback: (key: string) => (tool.down ? Effect.fail(new NoResponders({ tool: tool.name })) : Effect.sync(() => tool.readback(key))) } : {})
      })
    ),
  eventually: (probe, budgetMs) =>
    Effect.gen(function* () {
      for (let t = 0; ; t += Step) {
        yield* turns
        const v = yield* probe
        if (v !== undefined) return v
        if (t >= budgetMs) return yield* Effect.fail(new Error(`condition not met within ${budgetMs} ms of test time`))
        yield* advance(Step)
      }
    }),
  connectSession: (sessionId) =>
    Effect.sync(() => {
      presence.connect(sessionId)
      return Effect.sync(() => presence.disconnect(sessionId))
    })
}

loopSuite(memory)
