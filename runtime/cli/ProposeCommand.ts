import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { randomBytes } from "node:crypto"
import { WitnessClient } from "../client/Client.js"
import { devKeyPair } from "../client/DevKeys.js"
import { natsOptionsFromUrl } from "../ledger/Nats.js"
import type { JsonObject } from "../schema/Json.js"

const server = () => process.env["NATS_URL"] ?? `nats://127.0.0.1:${process.env["WK_NATS_PORT"] ?? 4322}`

/** `wk propose <tool> <args-json>`: proposes a call as a principal (dev key unless --key is given). */
export const proposeCommand = Command.make(
  "propose",
  {
    tool: Args.text({ name: "tool" }),
    args: Args.text({ name: "args-json" }),
    as: Options.text("as").pipe(Options.withDefault("agent:alice"), Options.withDescription("principal to propose as (signs with its dev key)")),
    session: Options.text("session").pipe(Options.withDefault("demo")),
    callId: Options.text("call-id").pipe(Options.optional),
    supersedes: Options.integer("supersedes").pipe(Options.optional, Options.withDescription("edit a held call: the generation it replaces (with --call-id)"))
  },
  ({ tool, args, as, session, callId, supersedes }) =>
    Effect.gen(function* () {
      const parsed = yield* Effect.try({ try: () => JSON.parse(args) as JsonObject, catch: () => new Error(`args-json is not JSON: ${args}`) })
      const opts = natsOptionsFromUrl(server(), { user: "agent", pass: "agent-dev" })
      const client = yield* Effect.acquireRelease(
        Effect.tryPromise({ try: () => WitnessClient.connect({ ...opts, principal: as, secretKey: devKeyPair(as).secretKey }), catch: (e) => new Error(`cannot connect to ${opts.servers}: ${String(e)} (is \`npm start\` running?)`) }),
        (c) => Effect.promise(() => c.close())
      )
      const id = Option.getOrElse(callId, () => `c${randomBytes(4).toString("hex")}`)
      const reply = yield* Effect.promise(() => client.propose({ session_id: session, turn_id: "t1", call_id: id, tool, args: parsed, ...Option.match(supersedes, { onNone: () => ({}), onSome: (g) => ({ supersedes: g }) }) }))
      yield* Console.log(JSON.stringify(reply, null, 2))
    }).pipe(Effect.scoped)
).pipe(Command.withDescription("Propose a tool call (example: wk propose money_transfer '{\"from\":\"alice\",\"to\":\"bob\",\"amount\":250}')"))
