import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Either, Layer, ManagedRuntime, Option, Schema } from "effect"
import { readFileSync } from "node:fs"
import { dirname, isAbsolute, join } from "node:path"
import { activePolicy } from "../policy/ActivePolicy.js"
import type { Adjudication } from "../policy/Adjudicator.js"
import { decideCall } from "../policy/CallDecision.js"
import { effectivePreferences, layerPreferences, wideningsOf } from "../policy/Preferences.js"
import { loadProfileFiles } from "../policy/ProfileFiles.js"
import { layerProfileSeams } from "../plugins/ProfileSeams.js"
import { layerHostEnvMemory } from "../plugins/HostEnv.js"
import { layerPluginHost } from "../plugins/PluginHost.js"
import { layerPluginSourceDir } from "../plugins/PluginSource.js"
import { Verdict } from "../schema/Events.js"
import type { JsonObject } from "../schema/Json.js"
import { Preferences } from "../schema/Preferences.js"
import type { Profile } from "../schema/Profile.js"
import { WitnessRule } from "../schema/WitnessContract.js"
import { ask, CliError, connectClient } from "./Connect.js"
import { ExitCode, exitOfReply } from "./Exit.js"
import { schemaProblem } from "./SchemaProblem.js"
import { defaultProfiles, repoRoot } from "./Paths.js"

/** Data plugins read through host functions; offline there is no live data, only what is given here. */
const HostData = Schema.Struct({
  kv: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  counters: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Record({ key: Schema.String, value: Schema.Number }) }))
})
type HostData = typeof HostData.Type

/** One call to decide offline. */
interface EvalCall {
  readonly principal: string
  readonly tool: string
  readonly args: JsonObject
  readonly preferences?: Preferences | undefined
}

/** The decision the kernel would record, or the refusal of a per-call preference that widens. */
export type Evaluation =
  | { readonly verdict: Verdict; readonly reasons: Adjudication["reasons"]; readonly rule?: WitnessRule; readonly contract?: Adjudication["contract"]; readonly executed: Adjudication["executed"]; readonly decisions: Adjudication["decisions"]; readonly preferences: Preferences }
  | { readonly verdict: "REFUSED"; readonly reasons: ReadonlyArray<{ by: string; reason: string }>; readonly field: string }

/**
 * The kernel's own decision (runtime/policy/CallDecision.ts: the floor, the built-in rules and
 * the pinned plugins' wasm, then preferences) for calls under `profiles`, with plugins read from
 * `pluginsDir` by the digest each pin names. No NATS: host data comes from `hostData`.
 */
export const evaluator = (profiles: ReadonlyArray<Profile>, pluginsDir: string, hostData: HostData = {}) => {
  const runtime = ManagedRuntime.make(
    layerProfileSeams.pipe(Layer.provide(Layer.merge(layerPluginHost.pipe(Layer.provide(layerPluginSourceDir(pluginsDir))), layerHostEnvMemory(hostData))))
  )
  const policy = activePolicy(0, profiles)
  const evaluate = async (call: EvalCall): Promise<Evaluation> => {
    const widening = call.preferences === undefined ? undefined : wideningsOf(call.preferences, layerPreferences(policy, call.principal))[0]
    if (widening !== undefined) return { verdict: "REFUSED", field: `payload.preferences.${widening.field}`, reasons: [{ by: "kernel", reason: widening.message }] }
    const a = await runtime.runPromise(
      decideCall({ ...call, session_id: "policy-eval", turn_id: "t1", call_id: "eval" }, policy, Date.now()) as Effect.Effect<Adjudication, never, never>
    )
    return {
      verdict: a.verdict,
      reasons: a.reasons,
      ...(a.contract !== undefined ? { rule: a.contract.rule, contract: a.contract } : {}),
      executed: a.executed,
      decisions: a.decisions,
      preferences: effectivePreferences(policy, call.principal, call.preferences)
    }
  }
  return { evaluate, dispose: () => runtime.dispose() }
}

/** A decision's output in a few words: its verdict or action, else its JSON cut short. */
const shortOutput = (o: unknown): string => {
  if (typeof o === "string") return o
  const r = o as { verdict?: unknown; action?: unknown; result?: { verdict?: unknown; action?: unknown } } | null
  const word = r?.verdict ?? r?.action ?? r?.result?.verdict ?? r?.result?.action
  if (typeof word === "string") return word
  const text = JSON.stringify(o)
  return text.length > 120 ? `${text.slice(0, 117)}...` : text
}

const describe = (call: EvalCall, e: Evaluation): string => {
  const lines = [`${e.verdict}  ${call.principal} -> ${call.tool} ${JSON.stringify(call.args)}`]
  for (const r of e.reasons) lines.push(`  reason:   ${r.by}: ${r.reason}`)
  if ("field" in e) return [...lines, `  field:    ${e.field}`].join("\n")
  if (e.rule !== undefined) lines.push(`  witness:  ${JSON.stringify(e.rule)}${e.contract?.veto !== undefined ? `  veto ${JSON.stringify(e.contract.veto)}` : ""}`)
  if (e.executed.tool !== call.tool || JSON.stringify(e.executed.args) !== JSON.stringify(call.args)) lines.push(`  executes: ${e.executed.tool} ${JSON.stringify(e.executed.args)}`)
  for (const d of e.decisions) lines.push(`  decision: ${d.by}: ${shortOutput(d.output)}`)
  return lines.join("\n")
}

const decodeJson = <A, I>(schema: Schema.Schema<A, I>, text: string, what: string): Effect.Effect<A, CliError> =>
  Effect.gen(function* () {
    const json = yield* Effect.try({
      try: () => JSON.parse(text) as unknown,
      catch: (e) => new CliError({ message: `${what} is not JSON (${e instanceof Error ? e.message.split("\n")[0] : "unreadable"}): write it as JSON, see docs/cli.md`, exit: ExitCode.usage })
    })
    const r = Schema.decodeUnknownEither(schema, { onExcessProperty: "error" })(json)
    if (Either.isLeft(r)) return yield* new CliError({ message: `${what}: ${schemaProblem(r.left)}`, exit: ExitCode.usage })
    return r.right
  })

const ArgsObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })

const profilesOption = Options.text("profiles").pipe(Options.optional, Options.withDescription("profile file or directory of *.json profiles (default WK_PROFILES or profiles/)"))
const pluginsOption = Options.text("plugins").pipe(Options.withDefault(join(repoRoot, "plugins")), Options.withDescription("folder of built plugins (plugin.wasm) the pins are looked up in by digest"))
const hostDataOption = Options.text("host-data").pipe(Options.optional, Options.withDescription('data plugins read, as JSON: {"counters":{"spent_today":{"agent:alice":700}},"kv":{...}}'))
const json = Options.boolean("json").pipe(Options.withDescription("print JSON instead of text"))

/** `wk policy eval`'s exit code per verdict: those of `wk propose` for the same decision. */
const exitOfVerdict = { ALLOW: ExitCode.ok, REQUIRE_WITNESS: ExitCode.held, DENY: ExitCode.denied, REFUSED: ExitCode.refused } as const

const evalCommand = Command.make(
  "eval",
  {
    tool: Args.text({ name: "tool" }).pipe(Args.withDescription("the tool a call would name")),
    args: Args.text({ name: "args-json" }).pipe(Args.withDescription("the call's arguments as one JSON object")),
    principal: Options.text("principal").pipe(Options.withDescription("the proposing principal")),
    preferences: Options.text("preferences").pipe(Options.optional, Options.withDescription("per-call preferences as JSON, as `wk propose` would send them")),
    profiles: profilesOption,
    plugins: pluginsOption,
    hostData: hostDataOption,
    json
  },
  (a) =>
    Effect.gen(function* () {
      const args = (yield* decodeJson(ArgsObject, a.args, "args-json")) as JsonObject
      const preferences = Option.isSome(a.preferences) ? yield* decodeJson(Preferences, a.preferences.value, "--preferences") : undefined
      const hostData = Option.isSome(a.hostData) ? yield* decodeJson(HostData, a.hostData.value, "--host-data") : {}
      const profiles = yield* loadProfileFiles(Option.getOrElse(a.profiles, () => defaultProfiles))
      const ev = evaluator(profiles, a.plugins, hostData)
      const call = { principal: a.principal, tool: a.tool, args, preferences }
      const e = yield* Effect.promise(() => ev.evaluate(call)).pipe(Effect.ensuring(Effect.promise(() => ev.dispose())))
      yield* Console.log(a.json ? JSON.stringify(e, null, 2) : describe(call, e))
      // The exit code is the verdict's, as `wk propose` would exit on the same decision.
      process.exitCode = exitOfVerdict[e.verdict]
    })
).pipe(Command.withDescription("Decide a call offline as the kernel would under the profiles and pinned plugins (like `opa eval`)"))

/** Expected decision of one test: a verdict, or a verdict with details that must match too. */
const Expectation = Schema.Union(
  Schema.Literal("ALLOW", "REQUIRE_WITNESS", "DENY", "REFUSED"),
  Schema.Struct({
    verdict: Schema.Literal("ALLOW", "REQUIRE_WITNESS", "DENY", "REFUSED"),
    /** The witness rule of a held call, exactly. */
    rule: Schema.optional(WitnessRule),
    /** The tool that would run (after transforms). */
    executed_tool: Schema.optional(Schema.String),
    /** A text one of the reasons must contain. */
    reason_contains: Schema.optional(Schema.String)
  })
)

/** A `wk policy test` file: profiles (relative to the file), host data, and the calls with what they must get. */
export const PolicyTestFile = Schema.Struct({
  profiles: Schema.optional(Schema.String),
  host_data: Schema.optional(HostData),
  tests: Schema.Array(
    Schema.Struct({
      name: Schema.optional(Schema.String),
      principal: Schema.String,
      tool: Schema.String,
      args: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
      preferences: Schema.optional(Preferences),
      expect: Expectation
    })
  ).pipe(Schema.minItems(1))
})

/** Where a decision differs from what a test expects, one phrase per difference; empty when it matches. */
export const mismatches = (expected: typeof Expectation.Type, e: Evaluation): ReadonlyArray<string> => {
  const x = typeof expected === "string" ? { verdict: expected } : expected
  const out: Array<string> = []
  if (e.verdict !== x.verdict) out.push(`expected ${x.verdict}, got ${e.verdict}${e.reasons[0] !== undefined ? ` (${e.reasons[0].by}: ${e.reasons[0].reason})` : ""}`)
  if ("rule" in x && x.rule !== undefined && JSON.stringify("rule" in e ? e.rule : null) !== JSON.stringify(x.rule)) out.push(`expected witness rule ${JSON.stringify(x.rule)}, got ${JSON.stringify("rule" in e ? (e.rule ?? null) : null)}`)
  if ("executed_tool" in x && x.executed_tool !== undefined && ("executed" in e ? e.executed.tool : undefined) !== x.executed_tool) out.push(`expected ${x.executed_tool} to run, got ${"executed" in e ? e.executed.tool : "nothing"}`)
  if ("reason_contains" in x && x.reason_contains !== undefined && !e.reasons.some((r) => r.reason.includes(x.reason_contains!))) out.push(`expected a reason containing '${x.reason_contains}', got ${JSON.stringify(e.reasons.map((r) => r.reason))}`)
  return out
}

const testCommand = Command.make(
  "test",
  { file: Args.file({ name: "file", exists: "yes" }).pipe(Args.withDescription("JSON test file: {profiles?, host_data?, tests: [{name?, principal, tool, args, preferences?, expect}]}")), profiles: profilesOption, plugins: pluginsOption, json },
  (a) =>
    Effect.gen(function* () {
      const t = yield* decodeJson(PolicyTestFile, readFileSync(a.file, "utf8"), a.file)
      const fromFile = t.profiles === undefined ? undefined : isAbsolute(t.profiles) ? t.profiles : join(dirname(a.file), t.profiles)
      const profiles = yield* loadProfileFiles(Option.getOrElse(a.profiles, () => fromFile ?? defaultProfiles))
      const ev = evaluator(profiles, a.plugins, t.host_data ?? {})
      const results = yield* Effect.promise(async () => {
        const out: Array<{ name: string; pass: boolean; verdict: string; failures: ReadonlyArray<string> }> = []
        for (const [i, c] of t.tests.entries()) {
          const e = await ev.evaluate({ principal: c.principal, tool: c.tool, args: c.args as JsonObject, preferences: c.preferences })
          const failures = mismatches(c.expect, e)
          out.push({ name: c.name ?? `#${i + 1} ${c.principal} ${c.tool}`, pass: failures.length === 0, verdict: e.verdict, failures })
        }
        return out
      }).pipe(Effect.ensuring(Effect.promise(() => ev.dispose())))
      const failed = results.filter((r) => !r.pass)
      if (a.json) yield* Console.log(JSON.stringify({ passed: results.length - failed.length, failed: failed.length, results }, null, 2))
      else {
        for (const r of results) yield* Console.log(`${r.pass ? "PASS" : "FAIL"}  ${r.name}${r.pass ? `  (${r.verdict})` : `: ${r.failures.join("; ")}`}`)
        yield* Console.log(`${failed.length === 0 ? "PASS" : "FAIL"}: ${results.length - failed.length}/${results.length}`)
      }
      if (failed.length > 0) process.exitCode = ExitCode.failed
    })
).pipe(Command.withDescription("Run table-driven policy tests from a file; exit 1 when any call gets another decision (like `opa test`)"))

const applyCommand = Command.make(
  "apply",
  {
    file: Args.file({ name: "profile", exists: "yes" }).pipe(Args.withDescription("the profile document (JSON) to apply")),
    principal: Options.text("principal").pipe(Options.withDescription("the policy admin signing the change")),
    key: Options.file("key", { exists: "yes" }).pipe(Options.optional, Options.withDescription("key file to sign with (default: the context's key, else the principal's dev key)")),
    json
  },
  (a) =>
    Effect.gen(function* () {
      const profile = (yield* decodeJson(ArgsObject, readFileSync(a.file, "utf8"), a.file)) as JsonObject
      // policy.apply is an admin subject: only the kernel role user may publish it (nats.conf).
      const client = yield* connectClient("kernel", a.principal, Option.getOrUndefined(a.key))
      const r = yield* ask("policy.apply", () => client.applyPolicy(profile))
      yield* Console.log(
        a.json
          ? JSON.stringify(r, null, 2)
          : r.status === 200
            ? `applied: policy epoch ${String(r.policy_epoch)}${r.duplicate === true ? " (duplicate: already applied)" : ""}`
            : r.status === 202
              ? `held: the change widens the policy and waits for another admin (held_id ${String(r.held_id)}); next: wk held show ${String(r.held_id)}`
              : `refused (${r.status} ${r.error?.code ?? ""}): ${r.error?.message ?? JSON.stringify(r)}`
      )
      process.exitCode = exitOfReply(r)
    }).pipe(Effect.scoped)
).pipe(Command.withDescription("Sign and send a profile as a policy change (policy.apply): 0 applied, 3 held for another admin"))

/** `wk policy`: decide calls offline, test a policy, apply a change. */
export const policyCommand = Command.make("policy").pipe(
  Command.withDescription("decide calls offline (eval), run policy tests (test), apply a profile (apply)"),
  Command.withSubcommands([evalCommand, testCommand, applyCommand])
)
