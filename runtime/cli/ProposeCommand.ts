import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { randomBytes } from "node:crypto"
import type { JsonObject } from "../schema/Json.js"
import { ask, CliError, connectClient } from "./Connect.js"
import { ExitCode, exitOfReply } from "./Exit.js"
import { describeDelivery, exitOfDelivery } from "./WitnessCommands.js"

/** One line per outcome: what happened to the call and what to do next. */
export const describeReply = (r: Record<string, unknown>): string => {
  const id = String(r["held_id"] ?? "")
  switch (r["outcome"]) {
    case "tool_failed":
    case "completed":
      return r["outcome"] === "tool_failed" || r["ok"] === false
        ? `tool_failed: the tool ran and reported a failure (held_id ${id}): ${String(r["error"] ?? JSON.stringify(r["result"]))}`
        : r["admission"] === "quarantined"
          ? `completed, result quarantined (held_id ${id}): ${JSON.stringify(r["quarantine"])}`
          : `completed (held_id ${id}): ${JSON.stringify(r["result"])}`
    case "held": {
      const request = r["witness_request"] as { contract?: { rule?: unknown } } | undefined
      return [
        `held: waits for witnesses (held_id ${id}), expires ${String(r["expires_at"])}`,
        `  rule: ${JSON.stringify(request?.contract?.rule ?? request?.contract ?? null)}`,
        `  next: wk held show ${id}`
      ].join("\n")
    }
    case "denied":
      return `denied (held_id ${id}): ${((r["reasons"] as Array<{ by: string; reason: string }> | undefined) ?? []).map((x) => `${x.by}: ${x.reason}`).join("; ")}`
    default: {
      const error = r["error"] as { code?: string; message?: string } | undefined
      return `refused (${String(r["status"])} ${error?.code ?? ""}): ${error?.message ?? JSON.stringify(r)}`
    }
  }
}

/** `wk propose <tool> <args-json>`: proposes a call as a principal; the exit code is the outcome (docs/cli.md). */
export const proposeCommand = Command.make(
  "propose",
  {
    tool: Args.text({ name: "tool" }).pipe(Args.withDescription("the tool to call, for example money_transfer")),
    args: Args.text({ name: "args-json" }).pipe(Args.withDescription("the call's arguments as one JSON object")),
    as: Options.text("as").pipe(Options.withDefault("agent:alice"), Options.withDescription("principal to propose as")),
    key: Options.file("key", { exists: "yes" }).pipe(Options.optional, Options.withDescription("key file to sign with (default: the context's key, else the principal's dev key)")),
    session: Options.text("session").pipe(Options.withDefault("demo"), Options.withDescription("session id the call belongs to (its result is delivered there)")),
    callId: Options.text("call-id").pipe(Options.optional, Options.withDescription("call id (default: a random one; the same id and arguments again get the same answer)")),
    json: Options.boolean("json").pipe(Options.withDescription("print the kernel's reply as JSON")),
    supersedes: Options.integer("supersedes").pipe(Options.optional, Options.withDescription("edit a held call: the generation it replaces (with --call-id)")),
    wait: Options.boolean("wait").pipe(Options.withDescription("if the call is held, wait for its delivered result; the exit code is then the final outcome")),
    timeout: Options.integer("timeout-ms").pipe(Options.withDefault(600_000), Options.withDescription("with --wait, give up after this long (exit 3: still held)"))
  },
  ({ tool, args, as, key, session, callId, json, supersedes, wait, timeout }) =>
    Effect.gen(function* () {
      const parsed = yield* Effect.try({
        try: () => JSON.parse(args) as unknown,
        catch: () => new CliError({ message: `args-json is not JSON: ${args} (quote it: '{"amount":250}')`, exit: ExitCode.usage })
      })
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return yield* new CliError({ message: `args-json must be a JSON object, got ${args}`, exit: ExitCode.usage })
      const client = yield* connectClient("agent", as, Option.getOrUndefined(key))
      const id = Option.getOrElse(callId, () => `c${randomBytes(4).toString("hex")}`)
      const reply = yield* ask(`propose ${tool}`, () => client.propose({ session_id: session, turn_id: "t1", call_id: id, tool, args: parsed as JsonObject, ...Option.match(supersedes, { onNone: () => ({}), onSome: (g) => ({ supersedes: g }) }) }))
      yield* Console.log(json ? JSON.stringify(reply, null, 2) : describeReply(reply as unknown as Record<string, unknown>))
      process.exitCode = exitOfReply(reply as { status: number; ok?: boolean })
      if (!wait || reply.status !== 202) return
      const heldId = reply.held_id
      const d = yield* Effect.tryPromise({
        try: () => client.result(heldId, { sessionId: session, timeoutMs: timeout, ack: true }),
        catch: (e) => new CliError({ message: `${heldId} is still held after ${timeout} ms (${e instanceof Error ? e.message : String(e)}): see \`wk held show ${heldId}\``, exit: ExitCode.held })
      })
      yield* Console.log(json ? JSON.stringify(d, null, 2) : describeDelivery(d))
      process.exitCode = exitOfDelivery(d)
    }).pipe(Effect.scoped)
).pipe(Command.withDescription("Propose a tool call; the exit code says completed (0), held (3), denied (4), refused (5), tool failed (8)"))
