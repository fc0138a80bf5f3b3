import { Schema } from "effect"

/**
 * A presentation template of a profile (`presentation` per tool): text with `{field}` or
 * `{field.sub}` placeholders naming call arguments. Rendered by runtime/policy/PresentationTemplate.ts.
 */

/** Longest template, and longest rendered summary. */
export const MaxTemplateLength = 200

export const Placeholder = /\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\}/g

/** A template: text with `{field}` or `{field.sub}` placeholders; every other brace is refused. */
export const PresentationTemplate = Schema.String.pipe(
  Schema.minLength(1),
  Schema.maxLength(MaxTemplateLength),
  Schema.filter((t) => {
    const rest = t.replace(Placeholder, "")
    return (!rest.includes("{") && !rest.includes("}")) || `a template's braces must enclose an argument path like {amount} or {to.iban}: ${JSON.stringify(t)}`
  }),
  Schema.filter((t) => !/[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/.test(t) || "a template may not hold control or direction-override characters")
)
