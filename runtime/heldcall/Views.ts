import type { HeldEvent } from "../schema/Events.js"
import type { HeldCallFacts } from "../schema/Facts.js"
import type { JsonObject, JsonValue } from "../schema/Json.js"
import { routeAdmits, type WitnessRule } from "../schema/WitnessContract.js"
import { canonicalCall } from "./Facts.js"
import { reportedOutcome } from "./ReportedOutcome.js"
import type { RuleProgress } from "./WitnessRuleEval.js"
import { lateRevocationsOf } from "./LateRevocations.js"

/**
 * What a reader may see of a held call, decided in one place for every read path (`held.get`,
 * the gateway's reads and event stream, the CLI, exports).
 *
 * - `auditor`: everything the log holds, quarantined bytes included (exports).
 * - `admin`: every fact, but no quarantined bytes (the operator CLI, a policy admin's read).
 * - `proposer`: its own call as `admin` sees it.
 * - `witness`: what a witness needs to decide; with disclosure `redacted` arguments, results and
 *   policy reasons are replaced. Its event stream carries no arguments, results or reasons at all.
 *
 * Quarantined bytes are the raw result or error of `effect.recorded` (before admission) and the
 * result admission refused: only the auditor's view holds them.
 */
export type Role = "auditor" | "admin" | "proposer" | "witness"

/** Who asks: an authenticated principal, its registered classes, and whether it is a policy admin. */
export interface Reader {
  readonly principal: string
  readonly classes: ReadonlyArray<string>
  readonly admin: boolean
}

/** Every class and principal a rule names, at any depth. */
export const namedIn = (rule: WitnessRule): { classes: Set<string>; principals: Set<string> } => {
  const classes = new Set<string>()
  const principals = new Set<string>()
  const walk = (r: WitnessRule): void => {
    if ("class" in r) classes.add(r.class)
    else if ("principal" in r) principals.add(r.principal)
    else if ("all" in r) r.all.forEach(walk)
    else if ("any" in r) r.any.forEach(walk)
    else r.quorum.of.forEach(walk)
  }
  walk(rule)
  return { classes, principals }
}

/**
 * True when the reader could give evidence that counts: the veto list names one of its classes, or
 * the active rule names its principal or one of its classes and the contract's route (if any)
 * admits it, since only routed approvals count. Never the proposer (not independent).
 */
export const mayWitness = (
  reader: { readonly principal?: string; readonly classes: ReadonlyArray<string> },
  held: { principal?: string; rule: WitnessRule | null; veto?: ReadonlyArray<string>; route?: WitnessRule }
): boolean => {
  if (held.rule === null) return false
  if (reader.principal !== undefined && held.principal === reader.principal) return false
  if (reader.classes.some((c) => (held.veto ?? []).includes(c))) return true
  if (held.route !== undefined && !routeAdmits(held.route, reader.principal ?? "", reader.classes)) return false
  const n = namedIn(held.rule)
  if (reader.principal !== undefined && n.principals.has(reader.principal)) return true
  return reader.classes.some((c) => n.classes.has(c))
}

/** The role an authenticated principal reads a call in, or null when the call is none of its business. */
export const roleOf = (reader: Reader, f: HeldCallFacts): Exclude<Role, "auditor"> | null => {
  if (f.spec === null) return null
  if (reader.admin) return "admin"
  if (f.spec.principal === reader.principal) return "proposer"
  const veto = f.witness_contract?.veto
  const route = f.witness_contract?.route
  return mayWitness(reader, { principal: f.spec.principal, rule: f.active_rule, ...(veto ? { veto } : {}), ...(route ? { route } : {}) }) ? "witness" : null
}

/** The disclosure in force for witnesses: the presentation's, or the proposer's preference. */
export const disclosureOf = (f: HeldCallFacts): "exact" | "redacted" =>
  f.witness_request?.presentation["disclosure"] === "redacted" || f.spec?.preferences?.disclosure === "redacted" ? "redacted" : "exact"

const typeOf = (v: JsonValue): string => (v === null ? "null" : Array.isArray(v) ? "array" : typeof v)

/** Every value replaced by its JSON type (one level deep for objects), as a `redacted` witness is shown. */
export const redactValue = (v: JsonValue): JsonValue => {
  if (v === null || typeof v !== "object" || Array.isArray(v)) return `[redacted ${typeOf(v)}]`
  const out: Record<string, JsonValue> = {}
  for (const [k, x] of Object.entries(v as JsonObject)) out[k] = `[redacted ${typeOf(x)}]`
  return out
}

/** The result a role may see: admitted results only (redacted for a redacted witness), everything for the auditor. */
const resultFor = (role: Role, f: HeldCallFacts, redacted: boolean): { result?: JsonValue } => {
  if (role === "auditor") return { result: f.result }
  if (f.result_admission !== "admitted") return {}
  return { result: redacted ? redactValue(f.result) : f.result }
}

/**
 * The `held.get` view of a call for a role. `progress`: how far the counting approvals are along
 * the active rule (computed by the reader against the registry in force; absent: not computed).
 */
/** The witnesses that withdrew their approval after the call was released (LateRevocations.ts), when any did. */
const revokedAfterRelease = (f: HeldCallFacts) => {
  const late = lateRevocationsOf(f)
  return late.length > 0 ? { revoked_after_release: late } : {}
}

export const heldView = (role: Role, f: HeldCallFacts, progress?: RuleProgress) => {
  const spec = f.spec
  const call = canonicalCall(f)
  const redacted = role === "witness" && disclosureOf(f) === "redacted"
  const presented = f.witness_request?.presentation["args"]
  const shownArgs = (args: JsonObject | undefined) => (args === undefined || !redacted ? args : redactValue(args))
  const args = redacted && presented !== null && typeof presented === "object" && !Array.isArray(presented) ? (presented as JsonObject) : shownArgs(call?.args)
  return {
    held_id: f.held_id,
    session_id: spec?.session_id,
    turn_id: spec?.turn_id,
    call_id: spec?.call_id,
    principal: spec?.principal,
    tool: call?.tool,
    args,
    call_digest: call?.call_digest,
    proposed: spec === null ? undefined : { tool: spec.tool, args: shownArgs(spec.args), call_digest: spec.call_digest },
    continuation_ref: spec?.continuation_ref,
    continuation_digest: spec?.continuation_digest,
    generation: f.generation,
    verdict: f.verdict,
    // Policy reasons may quote argument values ("amount 7741 is over ..."): a redacted witness sees who, not why.
    reasons: redacted ? f.reasons.map((r) => ({ by: r.by, reason: "[redacted string]" })) : f.reasons,
    witness_contract: f.witness_contract,
    contract_digest: f.contract_digest,
    witness_request: f.witness_request,
    active_rule: f.active_rule,
    ...(progress !== undefined ? { rule_progress: progress } : {}),
    created_at: spec?.created_at,
    expires_at: spec?.expires_at,
    lifecycle: f.lifecycle,
    readiness: f.readiness,
    policy_epoch: f.policy_epoch,
    policy_epoch_checked: f.policy_epoch_checked,
    execution: f.execution,
    needs_witness: f.needs_witness,
    dispatch_attempts: f.dispatch_attempts,
    result_admission: f.result_admission,
    continuation_delivery: f.continuation_delivery,
    delivery_id: f.delivery_id,
    ...(f.delivery_stopped_at !== undefined ? { delivery_stopped_at: f.delivery_stopped_at } : {}),
    // What happened, as reported: `tool_failed` when the tool ran and reported a failure.
    outcome: reportedOutcome(f),
    ...(spec?.parent_held_id !== undefined ? { parent_held_id: spec.parent_held_id, dependency_depth: spec.ancestors?.length ?? 1 } : {}),
    ...(f.dependencies !== undefined ? { dependencies: f.dependencies } : {}),
    ...revokedAfterRelease(f),
    evidence: f.evidence
      .filter((e) => e.generation === f.generation)
      .map((e) => ({ witness: e.witness, class: e.class, decision: e.decision, status: e.status, ...(e.reason ? { reason: e.reason } : {}), ...(e.standing !== undefined ? { standing: e.standing } : {}), issued_at: e.issued_at, expires_at: e.expires_at })),
    ...resultFor(role, f, redacted),
    // Whether the tool reported success: "completed" says the effect ran, not that it did what was asked.
    ...(f.effect !== null ? { tool_ok: f.effect.ok } : {}),
    ...(redacted ? {} : renamedError(toolErrorFor(role, f))),
    ...(role === "auditor" && f.effect !== null ? { effect: f.effect } : {}),
    ...(f.quarantine ? { quarantine: f.quarantine } : {}),
    last_seq: f.last_seq
  }
}

/** The tool's own failure message as the proposer may see it: only once admission let the result through. */
export const toolErrorFor = (role: Role, f: HeldCallFacts): { error?: string } =>
  f.effect?.ok === false && (role === "auditor" || f.result_admission === "admitted") ? { error: f.effect.error ?? "tool failed" } : {}

const renamedError = (e: { error?: string }): { tool_error?: string } => (e.error !== undefined ? { tool_error: e.error } : {})

const omit = (e: HeldEvent, keys: ReadonlyArray<string>): Record<string, unknown> => {
  const out: Record<string, unknown> = { ...e }
  for (const k of keys) delete out[k]
  return out
}

/**
 * One stored event as a role may see it. `effect.recorded` carries the tool's raw result or error
 * before admission: only the auditor sees those. A witness's events carry no arguments, results,
 * plugin decisions or the proposer's signed request: it reads the call through `heldView`, where
 * disclosure applies. Policy reasons, which may quote arguments, are left out of its events too.
 */
export const eventView = (role: Role, e: HeldEvent): Record<string, unknown> => {
  if (role === "auditor") return { ...e }
  if (e.type === "effect.recorded") return omit(e, ["result", "error"])
  if (e.type === "result.quarantined") return omit(e, ["decisions"])
  if (role !== "witness") return { ...e }
  switch (e.type) {
    case "call.proposed":
      return omit(e, ["args", "envelope"])
    case "call.adjudicated":
      return { ...omit(e, ["decisions", "executed", "reasons"]), ...(e.executed ? { executed: { tool: e.executed.tool, call_digest: e.executed.call_digest } } : {}) }
    case "call.denied":
      return omit(e, ["reasons"])
    case "result.admitted":
      return omit(e, ["result", "decisions"])
    case "dependency.added":
    case "dependency.refused":
      return omit(e, ["envelope"])
    default:
      return { ...e }
  }
}
