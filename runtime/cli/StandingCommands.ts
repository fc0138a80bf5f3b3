import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { randomBytes } from "node:crypto"
import type { StandingReply, StandingView } from "../client/Client.js"
import type { JsonValue } from "../schema/Json.js"
import type { ArgBound, StandingScope } from "../schema/StandingGrant.js"
import { ask, CliError, connectClient } from "./Connect.js"
import { ExitCode, exitOfReply } from "./Exit.js"
import { json, keyOpt, principalOpt } from "./SignerOptions.js"

const bounds = (name: string, what: string) => Options.text(name).pipe(Options.repeated, Options.withDescription(`${what} (FIELD=VALUE; repeatable)`))

/** `FIELD=VALUE` split, the value read as JSON when it parses (numbers, true, "quoted") and as text otherwise. */
const fieldValue = (flag: string, text: string) => {
  const i = text.indexOf("=")
  if (i <= 0) return Effect.fail(new CliError({ message: `--${flag} ${text}: expected FIELD=VALUE`, exit: ExitCode.usage }))
  const raw = text.slice(i + 1)
  let value: JsonValue = raw
  try {
    value = JSON.parse(raw) as JsonValue
  } catch {
    // plain text
  }
  return Effect.succeed([text.slice(0, i), value] as const)
}

/** The argument bounds the flags give, one entry per field. */
const argBounds = (o: { eq: ReadonlyArray<string>; oneOf: ReadonlyArray<string>; max: ReadonlyArray<string>; min: ReadonlyArray<string>; any: ReadonlyArray<string> }) =>
  Effect.gen(function* () {
    const out: Record<string, { -readonly [K in keyof ArgBound]: ArgBound[K] }> = {}
    const at = (f: string) => (out[f] ??= {})
    for (const t of o.eq) {
      const [f, v] = yield* fieldValue("eq", t)
      at(f).eq = v
    }
    for (const t of o.oneOf) {
      const [f, v] = yield* fieldValue("in", t)
      at(f).in = String(v).split(",").map((x) => x.trim())
    }
    for (const [flag, list] of [["max", o.max], ["min", o.min]] as const) {
      for (const t of list) {
        const [f, v] = yield* fieldValue(flag, t)
        if (typeof v !== "number") return yield* new CliError({ message: `--${flag} ${t}: the bound must be a number`, exit: ExitCode.usage })
        at(f)[flag] = v
      }
    }
    for (const f of o.any) at(f).any = true
    return out
  })

const describe = (g: StandingView) =>
  [
    `${g.grant_id}  by ${g.principal} (${g.class})${g.revoked_at !== undefined ? `  REVOKED ${g.revoked_at} by ${g.revoked_by}` : ""}`,
    `  covers      ${g.scope.tool} proposed by ${g.scope.principals.join(", ")}${Object.keys(g.scope.args ?? {}).length > 0 ? ` with ${JSON.stringify(g.scope.args)}` : ""}`,
    `  uses        ${g.uses.length} of ${g.max_uses}${g.uses.length > 0 ? `: ${g.uses.map((u) => u.held_id).join(", ")}` : ""}`,
    `  in force    ${g.not_before ?? "now"} .. ${g.expires_at}${g.reason !== undefined ? `\n  reason      ${g.reason}` : ""}`
  ].join("\n")

const report = (reply: StandingReply, asJson: boolean, ok: string) =>
  Effect.gen(function* () {
    if (asJson) yield* Console.log(JSON.stringify(reply, null, 2))
    else if (reply.status < 300 && reply.grant_id !== undefined) yield* Console.log(`${ok}\n${describe(reply as StandingView)}`)
    else yield* Console.log(`${reply.status} ${reply.reason ?? reply.error?.message ?? JSON.stringify(reply)}`)
    if (reply.status >= 300) process.exitCode = exitOfReply(reply)
  })

const grantCommand = Command.make(
  "grant",
  {
    principal: principalOpt,
    key: keyOpt,
    klass: Options.text("class").pipe(Options.withDescription("the witness class the approvals count under (human, ...)")),
    tool: Options.text("tool").pipe(Options.withDescription("the tool the grant covers")),
    agents: Options.text("for").pipe(Options.repeated, Options.withDescription("a principal whose calls it covers (repeatable; at least one)")),
    eq: bounds("eq", "an argument that must equal VALUE"),
    oneOf: bounds("in", "an argument that must be one of VALUE (comma-separated)"),
    max: bounds("max", "a numeric argument at most VALUE"),
    min: bounds("min", "a numeric argument at least VALUE"),
    any: Options.text("any").pipe(Options.repeated, Options.withDescription("an argument left free, explicitly (FIELD; repeatable): a call argument the grant neither bounds nor names here puts the call outside it")),
    hours: Options.float("hours").pipe(Options.withDescription("how long it stands, from now (at most 720)")),
    uses: Options.integer("uses").pipe(Options.withDescription("the most calls it approves (1-1000)")),
    id: Options.text("id").pipe(Options.optional, Options.withDescription("the grant's id (default: a new random one)")),
    reason: Options.text("reason").pipe(Options.optional, Options.withDescription("why, signed with the grant")),
    json
  },
  (o) =>
    Effect.gen(function* () {
      if (o.agents.length === 0) return yield* new CliError({ message: "say whose calls it covers: --for PRINCIPAL (at least one)", exit: ExitCode.usage })
      if (!(o.hours > 0)) return yield* new CliError({ message: "--hours must be more than 0", exit: ExitCode.usage })
      const args = yield* argBounds(o)
      const scope: StandingScope = { principals: o.agents, tool: o.tool, ...(Object.keys(args).length > 0 ? { args } : {}) }
      const client = yield* connectClient("witness", o.principal, Option.getOrUndefined(o.key))
      const grantId = Option.getOrElse(o.id, () => `sg_${randomBytes(8).toString("hex")}`)
      const reply = yield* ask(`grant ${grantId}`, () =>
        client.grantStanding({ grantId, class: o.klass, scope, maxUses: o.uses, expiresAt: new Date(Date.now() + o.hours * 3_600_000), ...(Option.isSome(o.reason) ? { reason: o.reason.value } : {}) })
      )
      yield* report(reply, o.json, reply.status === 200 ? "already recorded:" : "standing approval recorded:")
    }).pipe(Effect.scoped)
).pipe(Command.withDescription("Sign a standing approval: approve, in advance, calls of one tool by the named principals inside argument bounds, for a time and a number of uses"))

const revokeCommand = Command.make(
  "revoke",
  { grantId: Args.text({ name: "grant_id" }), principal: principalOpt, key: keyOpt, reason: Options.text("reason").pipe(Options.optional, Options.withDescription("why, signed")), json },
  (o) =>
    Effect.gen(function* () {
      const client = yield* connectClient("witness", o.principal, Option.getOrUndefined(o.key))
      const reply = yield* ask(`revoke ${o.grantId}`, () => client.revokeStanding(o.grantId, Option.getOrUndefined(o.reason)))
      yield* report(reply, o.json, reply.disposition === "duplicate" ? "already revoked:" : "revoked (calls it approved stay approved):")
    }).pipe(Effect.scoped)
).pipe(Command.withDescription("Revoke a standing approval you granted (or any, as an admin): no later call takes a use"))

const lsCommand = Command.make("ls", { principal: principalOpt, key: keyOpt, json }, (o) =>
  Effect.gen(function* () {
    const client = yield* connectClient("witness", o.principal, Option.getOrUndefined(o.key))
    const reply = yield* ask("list standing approvals", () => client.standing())
    if (reply.status !== 200) return yield* new CliError({ message: `${reply.status} ${reply.error?.message ?? JSON.stringify(reply)}`, exit: exitOfReply(reply) })
    if (o.json) return yield* Console.log(JSON.stringify(reply.grants, null, 2))
    yield* Console.log(reply.grants!.length === 0 ? `no standing approvals given by or covering ${o.principal}` : reply.grants!.map(describe).join("\n\n"))
  }).pipe(Effect.scoped)
).pipe(Command.withDescription("List the standing approvals you gave or that cover you (all of them, as an admin), with their uses"))

export const standingCommand = Command.make("standing").pipe(
  Command.withDescription("standing approvals: grant, revoke, ls"),
  Command.withSubcommands([grantCommand, revokeCommand, lsCommand])
)
