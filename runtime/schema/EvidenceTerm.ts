import { Schema } from "effect"
import { JsonObject, type JsonValue } from "./Json.js"
import { WitnessRule } from "./WitnessRule.js"

/**
 * A contract term that needs evidence of a kind (`git-ancestry`, `sql-readback`, `ci-status`, or
 * any kind a verifier serves), as data. `by` says who may supply it (a verifier's or a CI's
 * principal or class); `params` tell the verifier what to read (a repository or connection by
 * the name the verifier's own config gives it, a query); `expect` is what the read must show for
 * the term to be met. A string in `params` or `expect` that is exactly `{args.<field>}` stands for
 * that argument of the call, so a term binds the evidence to the call it holds.
 */
export const EvidenceTerm = Schema.Struct({
  name: Schema.String.pipe(Schema.pattern(/^[a-z][a-z0-9_-]{0,63}$/, { message: () => "a term name is a lowercase token" })),
  kind: Schema.String.pipe(Schema.pattern(/^[a-z][a-z0-9_-]{0,63}$/, { message: () => "an evidence kind is a lowercase token" })),
  by: WitnessRule,
  params: Schema.optional(JsonObject),
  expect: JsonObject
})
export type EvidenceTerm = typeof EvidenceTerm.Type

/**
 * What a verifier read for a term, as it signs it in an `evidence` attestation: the term and kind
 * it answers, and `read` (its findings, with the fields the term's `expect` names). Recorded with
 * the attestation, so the audit shows what was read.
 */
export const EvidenceRecord = Schema.Struct({
  term: Schema.String.pipe(Schema.maxLength(64)),
  kind: Schema.String.pipe(Schema.maxLength(64)),
  read: JsonObject
})
export type EvidenceRecord = typeof EvidenceRecord.Type

const ArgRef = /^\{args\.([A-Za-z0-9_]+)\}$/

/** `value` with every `{args.<field>}` string replaced by that argument of the call (null when the call has none). */
export const resolveTerm = (value: JsonValue, args: JsonObject): JsonValue => {
  if (typeof value === "string") {
    const m = ArgRef.exec(value)
    return m === null ? value : (args[m[1]!] ?? null)
  }
  if (Array.isArray(value)) return value.map((v) => resolveTerm(v, args))
  if (value !== null && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolveTerm(v, args)]))
  return value
}

const sameJson = (a: JsonValue | undefined, b: JsonValue): boolean => {
  if (a === undefined) return false
  if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return a === b
  if (Array.isArray(a) !== Array.isArray(b)) return false
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => sameJson(x, b[i]!))
  const ao = a as Record<string, JsonValue>
  const bo = b as Record<string, JsonValue>
  const keys = Object.keys(bo)
  return keys.length === Object.keys(ao).length && keys.every((k) => sameJson(ao[k], bo[k]!))
}

/** Whether a record meets a term for a call with `args`: same term and kind, and every field `expect` names read as expected. */
export const meetsTerm = (term: EvidenceTerm, record: EvidenceRecord, args: JsonObject): boolean =>
  record.term === term.name && record.kind === term.kind && Object.entries(resolveTerm(term.expect, args) as JsonObject).every(([k, v]) => sameJson(record.read[k], v))

const stableJson = (v: unknown): string =>
  Array.isArray(v) ? `[${v.map(stableJson).join(",")}]` : v !== null && typeof v === "object" ? `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${stableJson((v as Record<string, unknown>)[k])}`).join(",")}}` : JSON.stringify(v)

/** A term's identity: its canonical JSON (two contracts asking the same thing ask it once). */
export const termKey = (t: EvidenceTerm): string => stableJson(t)

/**
 * The evidence terms of joined contracts: every term any of them asks for (a join only adds
 * conditions), each once, in a stable order. Undefined when none asks for any.
 */
export const joinTerms = (lists: ReadonlyArray<ReadonlyArray<EvidenceTerm> | undefined>): ReadonlyArray<EvidenceTerm> | undefined => {
  const byKey = new Map<string, EvidenceTerm>()
  for (const list of lists) for (const t of list ?? []) byKey.set(termKey(t), t)
  return byKey.size === 0 ? undefined : [...byKey.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, t]) => t)
}
