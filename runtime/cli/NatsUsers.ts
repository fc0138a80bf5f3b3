import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { randomBytes } from "node:crypto"
import { Subjects } from "../schema/Subjects.js"

/** The NATS user a tool service connects as: `tool-<service>`. */
export const toolUserName = (service: string): string => `tool-${service}`

/**
 * The `nats.conf` users entry of one tool service: it may subscribe only to its own tools'
 * invoke and read-back subjects, publish nothing, and answer only requests it received
 * (`allow_responses`), so no other login can read its requests or answer in its place.
 */
export const toolUserEntry = (service: string, tools: ReadonlyArray<string>, password: string): string => {
  const bad = tools.find((t) => !/^[A-Za-z0-9_-]+$/.test(t) || t.startsWith("kernel_"))
  if (bad !== undefined) throw new Error(`tool '${bad}': a tool name is one token of [A-Za-z0-9_-], and kernel_* names are the kernel's own`)
  if (!/^[A-Za-z0-9_-]+$/.test(service)) throw new Error(`service '${service}': a service name is one token of [A-Za-z0-9_-]`)
  const subjects = tools.flatMap((t) => [Subjects.toolInvoke(t), Subjects.toolReadback(t)]).map((s) => JSON.stringify(s))
  return `{ user: ${toolUserName(service)}, password: ${password}, permissions: { publish: { deny: [">"] }, subscribe: { allow: [${subjects.join(", ")}] }, allow_responses: true } }`
}

/** `wk nats tool-user <service> <tool>...`: prints the users entry to add to nats.conf. */
const toolUserCommand = Command.make(
  "tool-user",
  {
    service: Args.text({ name: "service" }).pipe(Args.withDescription("the tool service's name (its user is tool-<service>)")),
    tools: Args.text({ name: "tool" }).pipe(Args.repeated, Args.withDescription("the tools it serves")),
    password: Options.text("password").pipe(Options.optional, Options.withDescription("default: 24 random bytes, base64url"))
  },
  ({ service, tools, password }) =>
    Effect.gen(function* () {
      if (tools.length === 0) return yield* Effect.fail(new Error("name at least one tool"))
      const entry = yield* Effect.try({ try: () => toolUserEntry(service, tools, Option.getOrElse(password, () => randomBytes(24).toString("base64url"))), catch: (e) => e as Error })
      yield* Console.log(entry)
    })
).pipe(Command.withDescription("Print the nats.conf users entry of a tool service allowed only its own tools"))

/** `wk nats`: helpers for nats.conf. */
export const natsCommand = Command.make("nats").pipe(Command.withDescription("nats.conf helpers"), Command.withSubcommands([toolUserCommand]))
