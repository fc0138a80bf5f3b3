import { Command } from "@effect/cli"
import { connect } from "@nats-io/transport-node"
import { Console, Effect } from "effect"
import { kvDemoBankLedger } from "../executor/DemoBankLedger.js"
import { connectFailure, natsOptionsFor, requestFailure } from "./Connect.js"

/**
 * `wk demo reset`: every demo bank account back at its opening balance, in its books (the
 * `wk_demo_bank` bucket) and in a running bank, which follows the reset. As the kernel user, the
 * only one that may write the books. Applied transfers stay recorded under their idempotency
 * keys, so a retried call is answered with what it did and moves no money again.
 */
const resetCommand = Command.make("reset", {}, () =>
  Effect.gen(function* () {
    const opts = { ...natsOptionsFor("kernel"), name: "wk-demo-reset" }
    const nc = yield* Effect.acquireRelease(
      Effect.tryPromise({ try: () => connect(opts), catch: (e) => connectFailure(e, opts) }),
      (c) => Effect.promise(() => c.close())
    )
    yield* Effect.tryPromise({ try: async () => (await kvDemoBankLedger(nc)).reset(), catch: (e) => requestFailure("demo reset", e) })
    yield* Console.log("demo bank reset: every account is back at its opening balance (10,000); applied transfers stay recorded by idempotency key")
  }).pipe(Effect.scoped)
).pipe(Command.withDescription("Put every demo bank account back at its opening balance (as the kernel NATS user)"))

/** `wk demo`: the demo bank's helpers. */
export const demoCommand = Command.make("demo").pipe(Command.withDescription("the demo bank: reset its balances"), Command.withSubcommands([resetCommand]))
