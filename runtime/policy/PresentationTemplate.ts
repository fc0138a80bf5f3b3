import { MaxTemplateLength, Placeholder } from "../schema/PresentationTemplate.js"
import type { JsonObject, JsonValue } from "../schema/Json.js"
import type { Profile } from "../schema/Profile.js"
import { isNarrowingProfile } from "./ActivePolicy.js"

/**
 * A one-line summary of a call for people deciding it, from a template per tool
 * ("Transfer {amount} EUR from {from} to {to}"). A placeholder names an argument by a dotted
 * path; only a number, string or boolean is put in. The summary is part of the presentation the
 * witness signs over (`presentation_digest`), so what is shown is what is bound.
 *
 * Safe by construction: a template whose placeholder is missing or not a scalar renders nothing
 * (the fallback summary is used instead, never a half-filled sentence); strings lose control and
 * direction-override characters, are cut to MaxValueLength, and are quoted unless they are one
 * plain word, so an argument cannot pass itself off as the template's own text.
 */

/** Longest interpolated value, in characters, before it is cut with an ellipsis. */
export const MaxValueLength = 64

// Control characters, and the bidi marks and overrides that could reorder what is displayed.
const Unsafe = /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]/g
const PlainWord = /^[\p{L}\p{N}_.:@/+#-]+$/u

/** A number with thousands separators (2500 → "2,500"); exact for every finite JSON number. */
export const groupDigits = (n: number): string => {
  if (!Number.isFinite(n)) return String(n)
  const [int, frac] = String(Math.abs(n)).split(".") as [string, string | undefined]
  if (int.includes("e")) return String(n)
  const grouped = int.replace(/\B(?=(\d{3})+(?!\d))/g, ",")
  return (n < 0 ? "-" : "") + grouped + (frac !== undefined ? "." + frac : "")
}

/** A string argument as it may appear in a summary: cleaned, cut, and quoted unless one plain word. */
export const shownString = (s: string): string => {
  const clean = s.replace(Unsafe, "")
  const cut = [...clean].length > MaxValueLength ? [...clean].slice(0, MaxValueLength - 1).join("") + "…" : clean
  return PlainWord.test(cut) ? cut : JSON.stringify(cut)
}

const shownValue = (v: JsonValue | undefined): string | undefined => {
  if (typeof v === "number") return groupDigits(v)
  if (typeof v === "string") return shownString(v)
  if (typeof v === "boolean") return v ? "yes" : "no"
  return undefined
}

const at = (args: JsonObject, path: string): JsonValue | undefined => {
  let v: JsonValue | undefined = args
  for (const k of path.split(".")) {
    if (v === null || typeof v !== "object" || Array.isArray(v) || !Object.prototype.hasOwnProperty.call(v, k)) return undefined
    v = (v as JsonObject)[k]
  }
  return v
}

/** The template filled from `args`, or undefined when a placeholder has no scalar value. */
export const renderTemplate = (template: string, args: JsonObject): string | undefined => {
  let missing = false
  const out = template.replace(Placeholder, (_m, path: string) => {
    const v = shownValue(at(args, path))
    if (v === undefined) missing = true
    return v ?? ""
  })
  return missing ? undefined : out.length > MaxTemplateLength ? out.slice(0, MaxTemplateLength - 1) + "…" : out
}

/** At most this many arguments are named in a fallback summary. */
const FallbackArgs = 4

/**
 * The summary when no template applies: the tool and its first scalar arguments by name
 * ("money_transfer: amount 2,500, from alice, to bob"); with `redacted`, only the tool.
 */
export const fallbackSummary = (tool: string, args: JsonObject, redacted: boolean): string => {
  if (redacted) return `${tool} (arguments redacted)`
  const parts: Array<string> = []
  const keys = Object.keys(args).sort()
  for (const k of keys) {
    const v = shownValue(args[k])
    if (v !== undefined && parts.length < FallbackArgs) parts.push(`${k} ${v}`)
  }
  const more = keys.length - parts.length
  const listed = parts.join(", ") + (more > 0 ? `${parts.length > 0 ? ", " : ""}${more} more` : "")
  return listed === "" ? tool : `${tool}: ${listed}`
}

/**
 * The template for a tool across profiles: a floor or organization profile's wins over a
 * project or user profile's (narrowing layers do not reword what authority layers show); within
 * a tier, the first profile in order.
 */
export const templateFor = (profiles: ReadonlyArray<Profile>, tool: string): string | undefined => {
  const pick = (ps: ReadonlyArray<Profile>) => ps.map((p) => p.presentation?.[tool]).find((t) => t !== undefined)
  return pick(profiles.filter((p) => !isNarrowingProfile(p))) ?? pick(profiles.filter(isNarrowingProfile))
}

/**
 * The summary shown for a call. A plugin's summary (a witness-contract provider's presentation)
 * comes first, then the profile template (exact disclosure only: a redacted call shows no
 * values), then the fallback made from the call. The witness contract's summary is never used:
 * it describes the rule ("a person approves ...; denied after an hour"), not the call, and a
 * title taken from it misleads the person deciding.
 */
export const summaryOf = (input: {
  readonly tool: string
  readonly args: JsonObject
  readonly redacted: boolean
  readonly providerSummary?: string | undefined
  readonly template?: string | undefined
}): string =>
  input.providerSummary ??
  (input.template !== undefined && !input.redacted ? renderTemplate(input.template, input.args) : undefined) ??
  fallbackSummary(input.tool, input.args, input.redacted)
