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

/**
 * Every per-call preference the protocol accepts (runtime/schema/Preferences.ts), as flags. They
 * only narrow: the kernel refuses (400, naming the field) one looser than the profiles set.
 */
const preferenceOptions = {
  requireWitness: Options.boolean("require-witness").pipe(Options.withDescription("ask for a witness even where policy would allow")),
  alwaysWitness: Options.text("always-witness").pipe(Options.repeated, Options.withDescription("a tool (trailing * matches a prefix) that always needs a witness; repeatable")),
  witnessRoute: Options.text("witness-route").pipe(Options.optional, Options.withDescription('who may witness holds the preferences cause, as a witness rule in JSON: \'{"class":"human"}\'')),
  expiresInMs: Options.integer("expires-in-ms").pipe(Options.optional, Options.withDescription("shorten the hold: it expires (fails closed) after this long")),
  blockMs: Options.integer("block-ms").pipe(Options.optional, Options.withDescription("kernel waits up to this long (at most 30000) for a held call to end before answering 202")),
  background: Options.boolean("background").pipe(Options.withDescription("answer 202 at once, even when allowed; the result arrives on the session")),
  cancelOnDisconnect: Options.boolean("cancel-on-disconnect").pipe(Options.withDescription("cancel the held call when this session disconnects")),
  canonicalize: Options.choice("canonicalize", ["auto", "preview"]).pipe(Options.optional, Options.withDescription("a canonicalizing replacement: run it (auto) or hold to show it first (preview)")),
  rewrite: Options.choice("rewrite", ["auto", "preview"]).pipe(Options.optional, Options.withDescription("any other same-tool replacement: auto or preview")),
  substitution: Options.choice("substitution", ["allow", "preview", "forbid"]).pipe(Options.optional, Options.withDescription("a replacement that runs another tool: allow, preview or forbid (deny)")),
  disclosure: Options.choice("disclosure", ["exact", "redacted"]).pipe(Options.optional, Options.withDescription("what witnesses are shown: the exact arguments or redacted values"))
}

interface PreferenceFlags {
  readonly requireWitness: boolean
  readonly alwaysWitness: ReadonlyArray<string>
  readonly witnessRoute: Option.Option<string>
  readonly expiresInMs: Option.Option<number>
  readonly blockMs: Option.Option<number>
  readonly background: boolean
  readonly cancelOnDisconnect: boolean
  readonly canonicalize: Option.Option<string>
  readonly rewrite: Option.Option<string>
  readonly substitution: Option.Option<string>
  readonly disclosure: Option.Option<string>
}

/** The `preferences` payload the flags ask for, or undefined when none is given. */
export const preferencesOf = (f: PreferenceFlags): Effect.Effect<JsonObject | undefined, CliError> =>
  Effect.gen(function* () {
    if (f.background && Option.isSome(f.blockMs)) return yield* new CliError({ message: "--background and --block-ms are two wait modes: give one", exit: ExitCode.usage })
    const routeText = Option.getOrUndefined(f.witnessRoute)
    const route = routeText !== undefined
      ? yield* Effect.try({ try: () => JSON.parse(routeText) as JsonObject, catch: () => new CliError({ message: `--witness-route is not JSON: ${routeText} (quote it: '{"class":"human"}')`, exit: ExitCode.usage }) })
      : undefined
    const transforms = {
      ...Option.match(f.canonicalize, { onNone: () => ({}), onSome: (v) => ({ canonicalize: v }) }),
      ...Option.match(f.rewrite, { onNone: () => ({}), onSome: (v) => ({ rewrite: v }) }),
      ...Option.match(f.substitution, { onNone: () => ({}), onSome: (v) => ({ substitution: v }) })
    }
    const p: JsonObject = {
      ...(f.requireWitness ? { require_witness: true } : {}),
      ...(f.alwaysWitness.length > 0 ? { always_witness: [...f.alwaysWitness] } : {}),
      ...(route !== undefined ? { witness_route: route } : {}),
      ...Option.match(f.expiresInMs, { onNone: () => ({}), onSome: (v) => ({ expires_in_ms: v }) }),
      ...(f.background ? { wait: { mode: "background" } } : Option.match(f.blockMs, { onNone: () => ({}), onSome: (v) => ({ wait: { mode: "block", max_ms: v } }) })),
      ...(f.cancelOnDisconnect ? { cancel_on_disconnect: true } : {}),
      ...(Object.keys(transforms).length > 0 ? { transforms } : {}),
      ...Option.match(f.disclosure, { onNone: () => ({}), onSome: (v) => ({ disclosure: v }) })
    }
    return Object.keys(p).length > 0 ? p : undefined
  })

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
    timeout: Options.integer("timeout-ms").pipe(Options.withDefault(600_000), Options.withDescription("with --wait, give up after this long (exit 3: still held)")),
    ...preferenceOptions
  },
  ({ tool, args, as, key, session, callId, json, supersedes, wait, timeout, ...flags }) =>
    Effect.gen(function* () {
      const parsed = yield* Effect.try({
        try: () => JSON.parse(args) as unknown,
        catch: () => new CliError({ message: `args-json is not JSON: ${args} (quote it: '{"amount":250}')`, exit: ExitCode.usage })
      })
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return yield* new CliError({ message: `args-json must be a JSON object, got ${args}`, exit: ExitCode.usage })
      const preferences = yield* preferencesOf(flags)
      const client = yield* connectClient("agent", as, Option.getOrUndefined(key))
      const id = Option.getOrElse(callId, () => `c${randomBytes(4).toString("hex")}`)
      const reply = yield* ask(`propose ${tool}`, () => client.propose({ session_id: session, turn_id: "t1", call_id: id, tool, args: parsed as JsonObject, ...(preferences !== undefined ? { preferences } : {}), ...Option.match(supersedes, { onNone: () => ({}), onSome: (g) => ({ supersedes: g }) }) }))
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
