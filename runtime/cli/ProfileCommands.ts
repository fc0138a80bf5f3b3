import { authorityOf, describePowers } from "../policy/Authority.js"
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect } from "effect"
import { activePolicy, isGranted } from "../policy/ActivePolicy.js"
import { layerOf } from "../policy/Layers.js"
import { layerPreferences } from "../policy/Preferences.js"
import { loadProfileFiles } from "../policy/ProfileFiles.js"
import type { Profile } from "../schema/Profile.js"
import { defaultProfiles } from "./Paths.js"

const tool = Args.text({ name: "tool" }).pipe(Args.withDescription("the tool a call would name"))
const principal = Options.text("principal").pipe(Options.withDescription("the proposing principal"))
const profilesOption = Options.text("profiles").pipe(Options.withDefault(defaultProfiles), Options.withDescription("profile file or directory of *.json profiles (default WK_PROFILES or profiles/)"))
const json = Options.boolean("json").pipe(Options.withDescription("print the explanation as JSON"))

const src = (p: Profile) => `${layerOf(p)} '${p.name}'`

/** The effective merged policy for one (principal, tool), and which layer and profile set each part. Pure. */
export const explain = (profiles: ReadonlyArray<Profile>, principalName: string, toolName: string) => {
  const policy = activePolicy(0, profiles)
  const prefs = layerPreferences(policy, principalName)
  const byName = new Map(profiles.map((p) => [p.name, p]))
  const plugins = profiles.flatMap((p) =>
    (p.plugins ?? []).map((pin) => {
      const rules = (pin.config as { rules?: Record<string, unknown> } | undefined)?.rules
      return { name: pin.name, version: pin.version, sha256: pin.sha256, stages: pin.stages, set_by: src(p), ...(rules?.[toolName] !== undefined ? { rule: rules[toolName] } : {}) }
    })
  )
  const stages = ["transform", "adjudicate", "witness_contract", "admit"].map((stage) => ({ stage, plugins: plugins.filter((x) => (x.stages as ReadonlyArray<string>).includes(stage)) })).filter((s) => s.plugins.length > 0)
  return {
    principal: principalName,
    tool: toolName,
    profiles: profiles.map((p) => ({ name: p.name, layer: layerOf(p) })),
    grant: { granted: isGranted(policy, principalName, toolName), set_by: profiles.filter((p) => p.grants?.[principalName]?.includes(toolName)).map(src) },
    rule: policy.rules.get(toolName) ?? null,
    rule_set_by: profiles.filter((p) => p.rules?.[toolName] !== undefined).map(src),
    held_ttl_ms: policy.heldTtlMs,
    preferences: prefs.preferences,
    preferences_set_by: prefs.from.map((n) => src(byName.get(n)!)),
    stages,
    // The principal's powers under these profiles, as the kernel judges a change (runtime/policy/Authority.ts).
    powers: describePowers(authorityOf(policy), principalName),
    note: stages.some((s) => s.stage === "adjudicate")
      ? "the rule of every layer and every adjudicate-stage plugin take part: the most restrictive opinion wins; project and user plugins only narrow"
      : "no adjudicate-stage plugins: the grant allows, and the rule of every layer narrows"
  }
}

const text = (e: ReturnType<typeof explain>): string => {
  const lines = [
    `${e.principal} -> ${e.tool}`,
    `  profiles:    ${e.profiles.map((p) => `${p.layer} '${p.name}'`).join(", ")}`,
    `  grant:       ${e.grant.granted ? `granted (${e.grant.set_by.join(", ")})` : "not granted: the kernel floor denies it"}`,
    `  rule:        ${e.rule === null ? "none" : JSON.stringify(e.rule)}${e.rule_set_by.length > 0 ? `  (${e.rule_set_by.join(", ")})` : ""}`,
    `  held_ttl_ms: ${e.held_ttl_ms}`,
    `  preferences: ${JSON.stringify(e.preferences)}${e.preferences_set_by.length > 0 ? `  (${e.preferences_set_by.join(", ")})` : ""}`,
    ...e.stages.flatMap((s) => [`  ${s.stage}:`, ...s.plugins.map((p) => `    ${p.name}@${p.version} (${p.set_by})${"rule" in p ? ` rule ${JSON.stringify(p.rule)}` : ""}`)]),
    `  powers:`,
    ...(e.powers.length === 0 ? ["    none"] : e.powers.map((p) => `    ${p}`)),
    `  note:        ${e.note}`
  ]
  return lines.join("\n")
}

const explainCommand = Command.make("explain", { tool, principal, profiles: profilesOption, json }, (a) =>
  Effect.gen(function* () {
    const profiles = yield* loadProfileFiles(a.profiles)
    const e = explain(profiles, a.principal, a.tool)
    yield* Console.log(a.json ? JSON.stringify(e, null, 2) : text(e))
  })
).pipe(Command.withDescription("show the effective merged policy for a call and which layer and profile set each part"))

/** `wk profile`: inspect policy profiles. */
export const profileCommand = Command.make("profile").pipe(Command.withDescription("inspect policy profiles"), Command.withSubcommands([explainCommand]))
